package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Tenant returns a client that acts as user, an ordinary authenticated
// user bound to clusterRole in namespace ns only (the built-in "edit" for a
// team member), so that a suite makes its attacks with no more rights than
// a tenant has. The binding is created with the suite's admin client.
func (e *Env) Tenant(ctx context.Context, ns, user, clusterRole string) (client.Client, error) {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + clusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if err := e.aggregate(ctx, clusterRole); err != nil {
		return nil, err
	}
	if err := e.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("binding %s to %s in %s: %w", user, clusterRole, ns, err)
	}
	if err := e.waitForGrants(ctx, ns, user, clusterRole); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Plane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", user, err)
	}
	return c, nil
}

// waitForGrants waits until the API server's authorizer grants user in ns
// what clusterRole's resource rules name (a verb and resource of each):
// the authorizer learns of a new RoleBinding, and of rules aggregate just
// added, a moment after they are written, and a tenant's first request
// must meet berth, not that moment.
func (e *Env) waitForGrants(ctx context.Context, ns, user, clusterRole string) error {
	role := &rbacv1.ClusterRole{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: clusterRole}, role); err != nil {
		return fmt.Errorf("reading ClusterRole %s: %w", clusterRole, err)
	}
	var checks []authorizationv1.ResourceAttributes
	for _, r := range role.Rules {
		if len(r.Verbs) == 0 || len(r.APIGroups) == 0 || len(r.Resources) == 0 || len(r.ResourceNames) > 0 {
			continue
		}
		for _, res := range r.Resources {
			checks = append(checks, authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: res})
		}
	}
	granted := func(ctx context.Context) (bool, error) {
		for _, attrs := range checks {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &attrs}}
			if err := e.Client.Create(ctx, sar); err != nil {
				return false, fmt.Errorf("reviewing %s's access: %w", user, err)
			}
			if !sar.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, granted); err != nil {
		return fmt.Errorf("waiting for %s's %s rights in %s to take effect: %w", user, clusterRole, ns, err)
	}
	return nil
}

// aggregate fills an aggregated ClusterRole (edit, admin, view) that has no
// rules yet with those of the ClusterRoles its aggregation rule selects, as
// kube-controller-manager's clusterrole-aggregation controller does: a
// plane without kube-controller-manager would otherwise bind a tenant to a
// role that grants nothing, and the attacks would be refused by RBAC
// rather than by berth.
func (e *Env) aggregate(ctx context.Context, name string) error {
	role := &rbacv1.ClusterRole{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
		return fmt.Errorf("reading ClusterRole %s: %w", name, err)
	}
	if role.AggregationRule == nil || len(role.Rules) > 0 {
		return nil
	}
	all := &rbacv1.ClusterRoleList{}
	if err := e.Client.List(ctx, all); err != nil {
		return fmt.Errorf("listing ClusterRoles: %w", err)
	}
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return fmt.Errorf("aggregation rule of %s: %w", name, err)
		}
		for i := range all.Items {
			part := &all.Items[i]
			if part.Name == name || !s.Matches(labels.Set(part.Labels)) {
				continue
			}
			if part.AggregationRule != nil && len(part.Rules) == 0 {
				// Aggregated roles nest (view is part of edit, edit of admin).
				if err := e.aggregate(ctx, part.Name); err != nil {
					return err
				}
				if err := e.Client.Get(ctx, client.ObjectKey{Name: part.Name}, part); err != nil {
					return fmt.Errorf("reading ClusterRole %s: %w", part.Name, err)
				}
			}
			role.Rules = append(role.Rules, part.Rules...)
		}
	}
	if err := e.Client.Update(ctx, role); err != nil {
		return fmt.Errorf("aggregating ClusterRole %s: %w", name, err)
	}
	return nil
}

// InstallTenantPolicies creates the ValidatingAdmissionPolicies and their
// bindings the install ships to narrow tenants' updates
// (config/rbac/tenant_policies.yaml), named as config/default's namePrefix
// names them, so that a suite's tenant meets the refusals a cluster's does.
func InstallTenantPolicies(ctx context.Context, c client.Client) error {
	return installPolicies(ctx, c, filepath.Join("config", "rbac", "tenant_policies.yaml"))
}

// InstallPodGatePolicy creates the MutatingAdmissionPolicy that gates
// queued pods inside the API server, and its binding
// (config/webhook/pod_gate_policy.yaml), named as the install names them.
func InstallPodGatePolicy(ctx context.Context, c client.Client) error {
	return installPolicies(ctx, c, filepath.Join("config", "webhook", "pod_gate_policy.yaml"))
}

// InstallPodPolicies creates the pod-gate policy (InstallPodGatePolicy)
// and the ValidatingAdmissionPolicy that checks queued pods' edits inside
// the API server (config/webhook/pod_checks_policy.yaml), as the install
// does on Kubernetes 1.36 and later.
func InstallPodPolicies(ctx context.Context, c client.Client) error {
	if err := InstallPodGatePolicy(ctx, c); err != nil {
		return err
	}
	return installPolicies(ctx, c, filepath.Join("config", "webhook", "pod_checks_policy.yaml"))
}

// DeletePodGatePolicy deletes what InstallPodGatePolicy created.
func DeletePodGatePolicy(ctx context.Context, c client.Client) error {
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, &admissionregistrationv1.MutatingAdmissionPolicy{}} {
		obj.SetName("berth-pod-gate")
		if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
			return fmt.Errorf("deleting %T berth-pod-gate: %w", obj, err)
		}
	}
	return nil
}

// installPolicies creates the admission policies and bindings of a file
// of the repository, prefixed berth- as config/default names them.
func installPolicies(ctx context.Context, c client.Client, file string) error {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), file))
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return fmt.Errorf("decoding %s: %w", file, err)
		}
		var obj client.Object
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		case "MutatingAdmissionPolicy":
			obj = &admissionregistrationv1.MutatingAdmissionPolicy{}
		case "MutatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		default:
			return fmt.Errorf("%s: unexpected kind %q", file, meta.Kind)
		}
		if err := yaml.Unmarshal([]byte(doc), obj); err != nil {
			return fmt.Errorf("decoding %s %s: %w", file, meta.Kind, err)
		}
		obj.SetName("berth-" + obj.GetName())
		if err := client.IgnoreAlreadyExists(c.Create(ctx, obj)); err != nil {
			return fmt.Errorf("creating %s %s: %w", meta.Kind, obj.GetName(), err)
		}
	}
	return nil
}
