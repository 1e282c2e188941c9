package pods

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// gang is an admitted Job's Workload (pod set main: two pods of one GPU and
// one cpu each, on flavor h200) and what the bound tests build around it.
type gang struct {
	scheme *runtime.Scheme
	job    *batchv1.Job
	wl     *berthv1.Workload
	flavor *berthv1.ResourceFlavor
}

// product is the node label of flavor h200 in gang.
const product = "gpu.example.com/product"

func newGang(t *testing.T) gang {
	t.Helper()
	const uid = "wl-uid"
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := berthv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", UID: "job-uid",
		Labels: map[string]string{berthv1.QueueNameLabel: "team"}}}
	perPod := corev1.ResourceList{gpu: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}
	return gang{scheme: scheme, job: job,
		flavor: &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
			Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{product: "h200"}}},
		wl: &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: jobs.WorkloadName("Job", job), UID: uid},
			Spec: berthv1.WorkloadSpec{QueueName: "team", PodSets: []berthv1.PodSet{{Name: "main", Count: 2, Requests: perPod}}},
			Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{ClusterQueue: "cq",
				PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 2, Flavors: map[corev1.ResourceName]string{gpu: "h200"}}}}}}}
}

// gpu is the GPU resource of gang's pods.
const gpu = corev1.ResourceName("nvidia.com/gpu")

// member is a running pod of g's Job, changed by change.
func (g gang) member(podName string, change func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: podName, UID: types.UID("u-" + podName),
		Labels:          map[string]string{berthv1.WorkloadLabel: string(g.wl.UID), berthv1.PodSetLabel: "main"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(g.job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{product: "h200", "zone": "a"},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: g.wl.Spec.PodSets[0].Requests.DeepCopy()}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if change != nil {
		change(p)
	}
	return p
}

// client is a fake API server holding g's objects and pods.
func (g gang) client(pods []*corev1.Pod) client.Client {
	objs := []client.Object{g.wl.DeepCopy(), g.job.DeepCopy(), g.flavor.DeepCopy()}
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	return fake.NewClientBuilder().WithScheme(g.scheme).WithObjects(objs...).Build()
}

// TestCreateIsBoundedByTheAdmission: a pod created ungated with berth's
// labels — what a Job's or an operator's controller creates once berth
// resumed the job — is refused once its pod set runs the count its
// Workload was admitted for, so that growing a running child Job or
// orphaning a running pod for its Job to replace runs nothing beyond the
// admission. Ended pods leave room; pods being deleted do not until they
// end, since they run through a grace period their owner chooses. The pods
// are counted by the API server: berth's cache holds only queued pods, and
// a Job's carry no queue label. A pod created with the labels and no
// controller is refused outright: only a controller creates pods with them.
// Each pod must also be shaped like the pods its pod set was admitted for:
// no more of a resource than each of them (cpu and memory aside, which a
// LimitRange adds), and on the flavor's nodes.
func TestCreateIsBoundedByTheAdmission(t *testing.T) {
	g := newGang(t)
	member, name := g.member, g.wl.Name
	deleting := func(p *corev1.Pod) {
		p.DeletionTimestamp, p.Finalizers = &metav1.Time{Time: time.Unix(1, 0)}, []string{"hold"}
	}
	succeeded := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	otherSet := func(p *corev1.Pod) { p.Labels[berthv1.PodSetLabel] = "other" }
	tests := []struct {
		name string
		// cached are the pods in berth's cache, which holds only queued
		// pods; api are the pods the API server holds.
		cached, api []*corev1.Pod
		created     *corev1.Pod
		want        string
	}{
		{name: "the first pods of the set", api: []*corev1.Pod{member("a1", nil)}, created: member("n1", nil)},
		{name: "a replacement beside a pod being deleted, which runs until it ends",
			api: []*corev1.Pod{member("a1", nil), member("a2", deleting)}, created: member("n1", nil),
			want: "pod set main of workload " + name + " already runs the 2 pods it was admitted for"},
		{name: "the replacement of a pod that ended", api: []*corev1.Pod{member("a1", nil), member("a2", succeeded)}, created: member("n1", nil)},
		{name: "the next pod of a Job whose ended pod the cache still shows running",
			cached: []*corev1.Pod{member("a1", nil), member("a2", nil)},
			api:    []*corev1.Pod{member("a1", nil), member("a2", succeeded)}, created: member("n1", nil)},
		{name: "one more than admitted of pods berth does not cache (a Job's: no queue label)",
			api: []*corev1.Pod{member("a1", nil), member("a2", nil)}, created: member("n1", nil),
			want: "pod set main of workload " + name + " already runs the 2 pods it was admitted for"},
		{name: "no pod set", api: []*corev1.Pod{member("a1", nil)}, created: member("n1", func(p *corev1.Pod) { delete(p.Labels, berthv1.PodSetLabel) }),
			want: "berth labels the pods of an admitted gang with berth.dev/pod-set beside berth.dev/workload, and counts them by it; this pod has none"},
		{name: "a pod made by hand with the gang's labels, as a member of a pod group would carry them once released",
			api: []*corev1.Pod{member("a1", nil)}, created: member("n1", func(p *corev1.Pod) {
				p.OwnerReferences, p.Labels[berthv1.PodGroupLabel] = nil, "g"
			}),
			want: "a pod created with them and without a controller"},
		{name: "more GPUs than each pod of its pod set was admitted with", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("8") }),
			want:    "the pod requests 8 of nvidia.com/gpu, and each pod of pod set main of workload " + name + " was admitted with 1"},
		{name: "a resource its pod set does not request", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("1")
			}),
			want: "the pod requests 1 of example.com/fpga, and each pod of pod set main of workload " + name + " was admitted with none"},
		{name: "more cpu, as a LimitRange gives a container that states none", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}})
			})},
		{name: "outside the flavor it was admitted on", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) { delete(p.Spec.NodeSelector, product) }),
			want:    "the pods of workload " + name + " run where it was admitted, with " + product + "=h200 in their node selector"},
		{name: "a node named outright", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) { p.Spec.NodeName = "n" }),
			want:    "spec.nodeName: Forbidden: the pods of an admitted gang are placed by kube-scheduler"},
		{name: "a toleration of another queue's headroom", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}),
			want: "spec.tolerations: Forbidden: the pods tolerate the taint berth.dev/headroom whatever its value"},
		{name: "a toleration of its own queue's headroom", api: []*corev1.Pod{member("a1", nil)},
			created: member("n1", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "berth.dev/headroom", Operator: corev1.TolerationOpEqual, Value: "cq"}}
			})},
		{name: "a pod set the admission does not name", api: []*corev1.Pod{member("a1", nil)}, created: member("n1", otherSet),
			want: `workload ` + name + ` admitted no pod set "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectCreate(t, Validator{Workloads: jobs.Workloads{Cache: g.client(tt.cached), API: g.client(tt.api)}}, tt.created, tt.want)
		})
	}
}

// expectCreate has v judge the creation of a copy of created (with no UID
// yet, as validating admission sees a new pod before it is named) and
// fails t unless it is refused with a message containing want, or, want
// empty, let in.
func expectCreate(t *testing.T, v Validator, created *corev1.Pod, want string) {
	t.Helper()
	p := created.DeepCopy()
	p.UID = ""
	_, err := v.ValidateCreate(context.Background(), p)
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %v, want a refusal containing %q", err, want)
	}
}
