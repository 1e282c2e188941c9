package headroom

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

// gpuPod is a pod template of one container asking for gpus GPUs.
func gpuPod(gpus string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "chat", berthv1.QueueNameLabel: "serving"}},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "berth.dev/admission"}},
			Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gpu: resource.MustParse(gpus), corev1.ResourceCPU: resource.MustParse("4")}}}}}}
}

func queueOf(nominal, borrowing string) *berthv1.ClusterQueue {
	r := berthv1.ResourceQuota{Name: gpu, NominalQuota: resource.MustParse(nominal)}
	if borrowing != "" {
		r.BorrowingLimit = ptr.To(resource.MustParse(borrowing))
	}
	return &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "serving"}, Spec: berthv1.ClusterQueueSpec{ResourceGroups: []berthv1.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{gpu}, Flavors: []berthv1.FlavorQuotas{{Name: "h200", Resources: []berthv1.ResourceQuota{r}}}}}}}
}

func TestAdmissible(t *testing.T) {
	two := target{replicas: 3, shapes: []podShape{{role: "worker", template: gpuPod("8"), count: 2}}}
	for _, tc := range []struct {
		name string
		cq   *berthv1.ClusterQueue
		t    target
		want int32
	}{
		{name: "nominal only", cq: queueOf("64", ""), t: two, want: 1},
		{name: "borrowing counts", cq: queueOf("64", "32"), t: two, want: 3},
		{name: "the target already holds more than the quota", cq: queueOf("16", ""), t: two, want: 0},
		{name: "cpu is not covered: only GPUs bound it", cq: queueOf("80", ""), t: target{replicas: 0, shapes: []podShape{{template: gpuPod("1"), count: 1}}}, want: 80},
		{name: "a queue covering nothing the replica asks for sets no bound", cq: &berthv1.ClusterQueue{}, t: two, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := admissible(tc.cq, tc.t); got != tc.want {
				t.Errorf("admissible = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		size    int32
		domains []string
		want    []berthv1.HeadroomDomain
	}{
		{size: 0, domains: []string{"a"}, want: nil},
		{size: 3, domains: nil, want: nil},
		{size: 1, domains: []string{"a", "b"}, want: []berthv1.HeadroomDomain{{Name: "a", Replicas: 1}}},
		{size: 5, domains: []string{"a", "b"}, want: []berthv1.HeadroomDomain{{Name: "a", Replicas: 3}, {Name: "b", Replicas: 2}}},
		{size: 2, domains: []string{""}, want: []berthv1.HeadroomDomain{{Name: "", Replicas: 2}}},
	} {
		got := spread(tc.size, tc.domains)
		if len(got) != len(tc.want) {
			t.Errorf("spread(%d, %v) = %v, want %v", tc.size, tc.domains, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("spread(%d, %v) = %v, want %v", tc.size, tc.domains, got, tc.want)
			}
		}
	}
}

// TestObserveKeepsTheDemandRuleAcrossRestarts: the history lives in the
// policy's status, so a new reconciler (a restart) sizes from the same
// scale-ups; what the window no longer reads is dropped.
func TestObserveKeepsTheDemandRuleAcrossRestarts(t *testing.T) {
	hp := &berthv1.HeadroomPolicy{Spec: berthv1.HeadroomPolicySpec{Sizing: berthv1.HeadroomSizing{Mode: berthv1.HeadroomDemand,
		Demand: &berthv1.HeadroomDemandRule{Window: metav1.Duration{Duration: time.Hour}, ProvisioningLatency: metav1.Duration{Duration: 10 * time.Minute}, Percentile: 100}}}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	observe(hp, 1, t0)
	observe(hp, 5, t0.Add(2*time.Minute))
	// A restart: nothing but the status is carried over.
	h := observe(hp.DeepCopy(), 5, t0.Add(20*time.Minute))
	if got := h.Demand(t0.Add(20*time.Minute), sizingPolicy(hp.Spec.Sizing).Demand); got != 4 {
		t.Errorf("demand after a restart = %d, want the rise of 4", got)
	}
	for i := range 100 {
		observe(hp, int32(i%3), t0.Add(time.Duration(30+i)*time.Minute))
	}
	if n := len(hp.Status.History); n > 72 {
		t.Errorf("the history holds %d observations, more than the window and latency read", n)
	}
}

func TestDesiredBuffersPinAndTolerate(t *testing.T) {
	hp := &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "serving"}}
	lws := &lwsv1.LeaderWorkerSet{Spec: lwsv1.LeaderWorkerSetSpec{LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
		Size: ptr.To[int32](4), LeaderTemplate: ptr.To(gpuPod("0")), WorkerTemplate: gpuPod("8")}}}
	tgt := target{level: "example.com/rack", shapes: lwsShapes(lws)}
	got := desiredBuffers(hp, tgt, "serving", []berthv1.HeadroomDomain{{Name: "r1", Replicas: 2}, {Name: "r2", Replicas: 1}})
	want := map[string]int32{"leader/r1": 2, "worker/r1": 6, "leader/r2": 1, "worker/r2": 3}
	if len(got) != len(want) {
		t.Fatalf("got %d buffers, want %d", len(got), len(want))
	}
	for _, b := range got {
		spec := b.template.Spec
		rack := spec.NodeSelector["example.com/rack"]
		role := strings.Split(strings.TrimPrefix(b.name, "headroom-chat-"), "-")[0]
		if w, ok := want[role+"/"+rack]; !ok || w != b.pods {
			t.Errorf("buffer %s: %d pods in rack %q, want %v", b.name, b.pods, rack, want)
		}
		if spec.NodeSelector[berthv1.HeadroomLabel] != "serving" || !tolerates(&spec, "serving") {
			t.Errorf("buffer %s is not pinned to the queue's headroom nodes: %v, %v", b.name, spec.NodeSelector, spec.Tolerations)
		}
		if _, queued := b.template.Labels[berthv1.QueueNameLabel]; queued || len(spec.SchedulingGates) > 0 {
			t.Errorf("buffer %s's pods would be queued by berth: %v, %v", b.name, b.template.Labels, spec.SchedulingGates)
		}
	}
	if tgt.shapes[1].template.Spec.NodeSelector != nil {
		t.Error("the target's own template was changed")
	}
}

func TestBufferName(t *testing.T) {
	long := strings.Repeat("p", 253)
	for _, n := range []string{bufferName("chat", "pod", "r1"), bufferName(long, "worker", "a/b c")} {
		if len(n) > 253 || !strings.HasPrefix(n, "headroom-") {
			t.Errorf("bufferName = %q (%d characters)", n, len(n))
		}
	}
	if bufferName("chat", "pod", "r1") == bufferName("chat", "pod", "r2") {
		t.Error("two domains share a buffer name")
	}
}

func TestFitReplicas(t *testing.T) {
	gpus := func(n string) room {
		return room{gpu: resource.MustParse(n), corev1.ResourceCPU: resource.MustParse("64")}
	}
	pair := target{shapes: []podShape{{role: "worker", template: gpuPod("4"), count: 2}}}
	for _, tc := range []struct {
		name  string
		rooms []room
		want  int32
		limit int32
	}{
		{name: "two nodes of 8 GPUs hold two replicas of two 4-GPU pods", rooms: []room{gpus("8"), gpus("8")}, limit: 3, want: 2},
		{name: "capped at what is kept", rooms: []room{gpus("8"), gpus("8")}, limit: 1, want: 1},
		{name: "half a replica's room is none", rooms: []room{gpus("4")}, limit: 5, want: 0},
		{name: "pods of a replica may share a node or not", rooms: []room{gpus("4"), gpus("4"), gpus("8")}, limit: 5, want: 2},
		{name: "no node, no headroom", rooms: nil, limit: 2, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fitReplicas(tc.rooms, pair, tc.limit); got != tc.want {
				t.Errorf("fitReplicas = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSizingPolicyLead: a period's lead defaults to the provisioning
// latency, and is nothing without a period.
func TestSizingPolicyLead(t *testing.T) {
	d := func(s string) *metav1.Duration { v, _ := time.ParseDuration(s); return &metav1.Duration{Duration: v} }
	rule := func(period, lead *metav1.Duration) berthv1.HeadroomSizing {
		return berthv1.HeadroomSizing{Mode: berthv1.HeadroomDemand, Demand: &berthv1.HeadroomDemandRule{Window: *d("26h"),
			ProvisioningLatency: *d("15m"), Percentile: 95, Period: period, Lead: lead}}
	}
	for _, tc := range []struct {
		name         string
		sizing       berthv1.HeadroomSizing
		period, lead time.Duration
	}{
		{name: "no period", sizing: rule(nil, nil)},
		{name: "a period, the latency as lead", sizing: rule(d("24h"), nil), period: 24 * time.Hour, lead: 15 * time.Minute},
		{name: "a period and a lead", sizing: rule(d("24h"), d("45m")), period: 24 * time.Hour, lead: 45 * time.Minute},
	} {
		got := sizingPolicy(tc.sizing).Demand
		if got.Period != tc.period || got.Lead != tc.lead {
			t.Errorf("%s: period %s lead %s, want %s and %s", tc.name, got.Period, got.Lead, tc.period, tc.lead)
		}
	}
}
