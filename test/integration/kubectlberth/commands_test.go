package kubectlberth_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/framework"
)

var _ = Describe("kubectl berth create", func() {
	It("creates a flavor, a ClusterQueue and a LocalQueue that berth accepts", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cli-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		out, _, err := berth("", "create", "resourceflavor", ns.Name, "--node-labels", "gpu=h200", "--topology-levels", "zone,rack")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("resourceflavor/" + ns.Name + " created\n"))
		_, _, err = berth("", "create", "clusterqueue", ns.Name, "--quota", ns.Name+":nvidia.com/gpu=16", "--namespace-selector", "kubernetes.io/metadata.name="+ns.Name)
		Expect(err).NotTo(HaveOccurred())
		_, _, err = berth("", "create", "localqueue", "team", "-n", ns.Name, "--clusterqueue", ns.Name)
		Expect(err).NotTo(HaveOccurred())

		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns.Name}, cq)).To(Succeed())
		Expect(cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Equal(resource.MustParse("16"))).To(BeTrue())
		lq := &berthv1.LocalQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "team"}, lq)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lq), lq)).To(Succeed())
			g.Expect(lq.Status.Conditions).To(ContainElement(HaveField("Status", metav1.ConditionTrue)), "berth finds its ClusterQueue active")
		}).WithContext(ctx).Should(Succeed())
	})

	It("passes on berth's refusal, which says what to fix", func(ctx SpecContext) {
		_, _, err := berth("", "create", "resourceflavor", "bad", "--node-labels", "not a key=x")
		Expect(err).To(MatchError(ContainSubstring("creating ResourceFlavor bad")))
		Expect(err.Error()).To(ContainSubstring("nodeLabels"))
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "bad"}, &berthv1.ResourceFlavor{})).NotTo(Succeed(), "nothing was created")
	})
})

var _ = Describe("kubectl berth import kueue", func() {
	It("reads Kueue's objects from the cluster and makes berth objects berth accepts", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kueue-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		scheme, err := framework.NewScheme()
		Expect(err).NotTo(HaveOccurred())
		Expect(kueue.AddToScheme(scheme)).To(Succeed())
		kueueClient, err := client.New(env.Plane.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		for _, o := range []client.Object{
			&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "k-" + ns.Name}, Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}}},
			&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "k-" + ns.Name}, Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{},
				ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
					Flavors: []kueue.FlavorQuotas{{Name: kueue.ResourceFlavorReference("k-" + ns.Name), Resources: []kueue.ResourceQuota{
						{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}}}}}}},
			&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "team"},
				Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference("k-" + ns.Name)}},
		} {
			Expect(kueueClient.Create(ctx, o)).To(Succeed())
		}
		out, _, err := berth("", "import", "kueue", "--from-cluster")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("name: k-" + ns.Name))
		Expect(applyAll(ctx, out, ns.Name)).To(Succeed())
		lq := &berthv1.LocalQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "team"}, lq)).To(Succeed())
		Expect(lq.Spec.ClusterQueue).To(Equal("k-" + ns.Name))
	})

	It("turns Kueue's own examples into objects berth accepts", func(ctx SpecContext) {
		dir, err := framework.ModuleDir("sigs.k8s.io/kueue")
		Expect(err).NotTo(HaveOccurred())
		examples := filepath.Join(dir, "cmd", "kueueviz", "examples")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "examples-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		args := []string{"import", "kueue"}
		for _, f := range []string{"00-resource-flavor.yaml", "01-cluster-queues.yaml", "02-local-queues.yaml", "07-workload-priority-classes.yaml"} {
			args = append(args, "-f", filepath.Join(examples, f))
		}
		out, errOut, err := berth("", args...)
		Expect(err).NotTo(HaveOccurred())
		Expect(errOut).To(ContainSubstring("settings were not mapped"))
		Expect(applyAll(ctx, out, ns.Name)).To(Succeed(), "every imported object passes berth's validation")
	})

	It("reads stdin with -f -", func() {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "cmd", "kubectl-berth", "importkueue", "testdata", "provisioning-topology.yaml"))
		Expect(err).NotTo(HaveOccurred())
		out, _, err := berth(string(data), "import", "kueue", "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("name: training"))
	})
})

// applyAll creates every object of a YAML stream, namespaced ones without
// a namespace in ns.
func applyAll(ctx context.Context, stream, ns string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(stream), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if u.GetKind() == "LocalQueue" && u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, u)); err != nil {
			return err
		}
	}
}
