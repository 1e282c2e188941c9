package install_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldManager is whom the suite's server-side applies are recorded for,
// as `kubectl apply --server-side` records "kubectl".
const fieldManager = "kubectl"

// decode splits a multi-document manifest into objects.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding manifest document %d: %w", len(out)+1, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// rank orders objects as kubectl's apply does not but an installer must:
// namespaces and CRDs before what lives in them or is of their kinds.
func rank(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	default:
		return 2
	}
}

// apply server-side applies objs, namespaces and CRDs first, waiting for
// each CRD to be established before anything else.
func apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	for i, u := range sorted {
		if i > 0 && rank(sorted[i-1]) == 1 && rank(u) == 2 {
			if err := waitEstablished(ctx, sorted); err != nil {
				return err
			}
		}
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		established := func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, crd)).To(Succeed())
			g.Expect(crd.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
		}
		if err := InterceptGomegaFailure(func() {
			Eventually(established).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		}); err != nil {
			return fmt.Errorf("CRD %s not established: %w", u.GetName(), err)
		}
	}
	return nil
}

// uninstall deletes objs in reverse order of install, as `kubectl delete
// -f` does, and waits until all of them are gone.
func uninstall(ctx context.Context, objs []*unstructured.Unstructured) {
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *unstructured.Unstructured) int { return rank(b) - rank(a) })
	for _, u := range sorted {
		err := k8s.Delete(ctx, u.DeepCopy(), client.PropagationPolicy("Background"))
		ExpectWithOffset(1, client.IgnoreNotFound(err)).To(Succeed(), "deleting %s %s", u.GetKind(), u.GetName())
	}
	for _, u := range sorted {
		EventuallyWithOffset(1, func() bool {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "%s %s is gone", u.GetKind(), u.GetName())
	}
}

// deployment is the install's berth-controller Deployment.
func deployment(objs []*unstructured.Unstructured) *appsv1.Deployment {
	return findTyped(objs, "Deployment", &appsv1.Deployment{})
}

// findTyped converts the one object of kind in objs into into.
func findTyped[T client.Object](objs []*unstructured.Unstructured, kind string, into T) T {
	var n int
	for _, u := range objs {
		if u.GetKind() == kind {
			ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)).To(Succeed())
			n++
		}
	}
	ExpectWithOffset(1, n).To(Equal(1), "one %s in the install", kind)
	return into
}

// metricsReader is the ClusterRole that grants scraping berth's metrics.
func metricsReader(objs []*unstructured.Unstructured) *rbacv1.ClusterRole {
	var found *rbacv1.ClusterRole
	for _, u := range objs {
		if u.GetKind() != "ClusterRole" {
			continue
		}
		r := &rbacv1.ClusterRole{}
		ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r)).To(Succeed())
		for _, rule := range r.Rules {
			if slices.Contains(rule.NonResourceURLs, "/metrics") {
				found = r
			}
		}
	}
	ExpectWithOffset(1, found).NotTo(BeNil(), "a ClusterRole granting get on /metrics")
	return found
}

// named is the object of kind and name in objs.
func named(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	Fail(fmt.Sprintf("no %s %s in the install", kind, name))
	return nil
}

// withoutRule returns ClusterRole u without its rule for resource in
// group, and that rule.
func withoutRule(u *unstructured.Unstructured, group, resource string) (*unstructured.Unstructured, rbacv1.PolicyRule) {
	var removed rbacv1.PolicyRule
	r := &rbacv1.ClusterRole{}
	ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r)).To(Succeed())
	r.Rules = slices.DeleteFunc(r.Rules, func(rule rbacv1.PolicyRule) bool {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) {
			removed = rule
			return true
		}
		return false
	})
	ExpectWithOffset(1, removed.Verbs).NotTo(BeEmpty(), "ClusterRole %s has a rule for %s.%s", r.Name, resource, group)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := &unstructured.Unstructured{Object: m}
	out.SetAPIVersion(rbacv1.SchemeGroupVersion.String())
	out.SetKind("ClusterRole")
	return out, removed
}

// override replaces or adds --name=value flags in args.
func override(args []string, flags map[string]string) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		_, replaced := flags[name]
		return replaced
	})
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, "--"+k+"="+flags[k])
	}
	return out
}
