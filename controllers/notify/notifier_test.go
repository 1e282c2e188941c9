package notify

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// recordingSink keeps what it is sent.
type recordingSink struct {
	mu  sync.Mutex
	got []*Report
}

func (*recordingSink) Type() string { return "webhook" }

func (s *recordingSink) Send(_ context.Context, r *Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	return nil
}

func (s *recordingSink) headlines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.got {
		out = append(out, r.Headline())
	}
	return out
}

// admittedWorkload is the Workload of Job team-a/train, 4 pods of 8 GPUs,
// admitted to ClusterQueue gpu.
func admittedWorkload() *berthv1.Workload {
	return &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-train", UID: "wl-1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-1", Controller: ptr.To(true)}}},
		Spec: berthv1.WorkloadSpec{QueueName: "team", PodSets: []berthv1.PodSet{{Name: "main", Count: 4,
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}},
		Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{ClusterQueue: "gpu", PodSetAssignments: []berthv1.PodSetAssignment{{
			Name: "main", Count: 4, Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}},
	}
}

func gangPod(i int, restarts int32, last *corev1.ContainerStateTerminated) *corev1.Pod {
	p := podWith(restarts, last, nil)
	p.Name = "train-" + string(rune('a'+i))
	p.Labels = map[string]string{berthv1.WorkloadLabel: "wl-1"}
	return p
}

// startNotifier runs a Notifier on a fake clock with one policy posting
// to the sink, and returns a function that advances time until cond.
func startNotifier(t *testing.T, p Policy, sink Sink) (*Notifier, func(cond func() bool)) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	n := NewNotifier(reader, reader, nil, metrics.New(), logr.Discard(), NotifierOptions{Clock: clk, Dispatch: fastOptions()})
	n.SetPolicy(p, sink)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = n.Start(ctx) }()
	g := NewWithT(t)
	// Only a leading notifier takes failures in.
	g.Eventually(n.leading.Load).Should(BeTrue())
	return n, func(cond func() bool) {
		g.Eventually(func() bool {
			clk.Step(time.Second)
			return cond()
		}).WithTimeout(time.Minute).WithPolling(time.Millisecond).Should(BeTrue())
	}
}

// tenantPolicy is team-a's policy with a 5 min window and perHour
// reports an hour.
// collected counts the failures the notifier's policies hold, waiting
// to be reported: the test steps the clock only once they are in.
func collected(n *Notifier) func() int {
	return func() int {
		n.policyMu.Lock()
		defer n.policyMu.Unlock()
		total := 0
		for _, ps := range n.policies {
			for _, b := range ps.agg.buckets {
				if b.report != nil {
					total += len(b.report.Failures) + b.report.Suppressed
				}
			}
		}
		return total
	}
}

func tenantPolicy(perHour int32) Policy {
	return Policy{Key: "team-a/chat", Namespace: "team-a",
		Settings: berthv1.NotificationSettings{DedupWindowSeconds: 300, MaxReportsPerHour: perHour}}
}

func TestNotifierFoldsAGangsFailures(t *testing.T) {
	sink := &recordingSink{}
	n, advance := startNotifier(t, tenantPolicy(60), sink)
	n.workloadSeen(nil, admittedWorkload())
	oom := &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}
	for i := range 3 {
		n.podUpdated(gangPod(i, 0, nil), gangPod(i, 1, oom))
	}
	NewWithT(t).Eventually(collected(n)).Should(Equal(3))
	advance(func() bool { return len(sink.headlines()) == 1 })
	if got := sink.headlines()[0]; got != "3 of 4 pods of Job team-a/train were OOM-killed: OOMKilled" {
		t.Errorf("headline %q", got)
	}
	if r := sink.got[0]; r.IdleGPUs() != 8 || r.Gang.Flavor != "h200" {
		t.Errorf("report %+v: want 8 idle GPUs on the one pod left, flavor h200", r)
	}
}

func TestNotifierIgnoresPodsOfGangsItDidNotAdmit(t *testing.T) {
	sink := &recordingSink{}
	n, advance := startNotifier(t, tenantPolicy(60), sink)
	pending := admittedWorkload()
	pending.Status.Admission = nil
	n.workloadSeen(nil, pending)
	oom := &corev1.ContainerStateTerminated{Reason: "OOMKilled"}
	n.podUpdated(gangPod(0, 0, nil), gangPod(0, 1, oom))
	// A report about an admitted gang, sent after: the first one was not.
	other := admittedWorkload()
	other.UID = "wl-2"
	n.workloadSeen(nil, other)
	p := gangPod(1, 0, nil)
	p.Labels[berthv1.WorkloadLabel] = "wl-2"
	q := p.DeepCopy()
	q.Status.ContainerStatuses[0].RestartCount = 1
	n.podUpdated(p, q)
	NewWithT(t).Eventually(collected(n)).Should(Equal(1))
	advance(func() bool { return len(sink.headlines()) > 0 })
	if got := sink.headlines(); len(got) != 1 || got[0] != "1 of 4 pods of Job team-a/train restarted: Restarted" {
		t.Errorf("reports %q, want only the admitted gang's", got)
	}
}

func TestNotifierReportsARequeueWithItsQueue(t *testing.T) {
	sink := &recordingSink{}
	n, advance := startNotifier(t, tenantPolicy(60), sink)
	wl := admittedWorkload()
	n.workloadSeen(nil, wl)
	evicted := wl.DeepCopy()
	evicted.Status.Conditions = []metav1.Condition{{Type: berthv1.ConditionEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"}}
	n.workloadSeen(wl, evicted)
	requeued := evicted.DeepCopy()
	requeued.Status.Admission = nil
	requeued.Status.Conditions[0].Reason = "Requeued"
	n.workloadSeen(evicted, requeued)
	NewWithT(t).Eventually(collected(n)).Should(Equal(2))
	advance(func() bool { return len(sink.headlines()) == 2 })
	for _, r := range sink.got {
		if r.Gang.ClusterQueue != "gpu" {
			t.Errorf("%s: ClusterQueue %q, want the one it was admitted to", r.Headline(), r.Gang.ClusterQueue)
		}
	}
	NewWithT(t).Expect(sink.headlines()).To(ConsistOf("Job team-a/train evicted: Preempted", "Job team-a/train requeued: Requeued"))
}

func TestNotifierFollowerTakesNothingIn(t *testing.T) {
	n := NewNotifier(nil, nil, nil, metrics.New(), logr.Discard(), NotifierOptions{Dispatch: fastOptions()})
	n.workloadSeen(nil, admittedWorkload())
	n.podUpdated(gangPod(0, 0, nil), gangPod(0, 1, nil))
	if len(n.incoming) != 0 {
		t.Errorf("a follower queued %d failures", len(n.incoming))
	}
}

func TestNotifierKeepsThePolicysRate(t *testing.T) {
	sink := &recordingSink{}
	n, advance := startNotifier(t, tenantPolicy(1), sink)
	for i, uid := range []string{"wl-1", "wl-2", "wl-3"} {
		wl := admittedWorkload()
		wl.UID = types.UID(uid)
		n.workloadSeen(nil, wl)
		p := gangPod(i, 0, nil)
		p.Labels[berthv1.WorkloadLabel] = uid
		q := p.DeepCopy()
		q.Status.ContainerStatuses[0].RestartCount = 1
		n.podUpdated(p, q)
	}
	NewWithT(t).Eventually(collected(n)).Should(Equal(3))
	advance(func() bool { return len(sink.headlines()) == 1 })
	dropped := n.metrics.NotificationsTotal.WithLabelValues("webhook", metrics.NotificationDropped)
	advance(func() bool { return testutil.ToFloat64(dropped) == 2 })
	if got := len(sink.headlines()); got != 1 {
		t.Errorf("%d reports with a rate of 1 an hour", got)
	}
}

// TestNotifierLogLinesByPolicyKind: a report carries the log lines its
// policy asks for; unset, a NotificationPolicy's carry 20 and a
// ClusterNotificationPolicy's none, since they leave the tenant's
// namespace.
func TestNotifierLogLinesByPolicyKind(t *testing.T) {
	cluster := Policy{Key: "platform", Namespaces: labels.Everything(),
		Settings: berthv1.NotificationSettings{DedupWindowSeconds: 300, MaxReportsPerHour: 60}}
	clusterWithLogs := cluster
	clusterWithLogs.Settings.LogLines = ptr.To[int32](10)
	tenantWithout := tenantPolicy(60)
	tenantWithout.Settings.LogLines = ptr.To[int32](0)
	cases := []struct {
		name   string
		policy Policy
		want   int64
	}{
		{"NotificationPolicy, unset", tenantPolicy(60), 20},
		{"NotificationPolicy, 0", tenantWithout, 0},
		{"ClusterNotificationPolicy, unset", cluster, 0},
		{"ClusterNotificationPolicy, set", clusterWithLogs, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordingSink{}
			n, advance := startNotifier(t, tc.policy, sink)
			n.workloadSeen(nil, admittedWorkload())
			n.podUpdated(gangPod(0, 0, nil), gangPod(0, 1, &corev1.ContainerStateTerminated{Reason: "OOMKilled"}))
			NewWithT(t).Eventually(collected(n)).Should(Equal(1))
			advance(func() bool { return len(sink.headlines()) == 1 })
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if got := sink.got[0].LogLines; got != tc.want {
				t.Errorf("LogLines = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestNotifierReportsAReplicaOnItsRecord: a Deployment replica admitted on
// a record on its pod has no Workload; its failures are reported from the
// record, as the pod's, and a forged record is not a gang.
func TestNotifierReportsAReplicaOnItsRecord(t *testing.T) {
	sink := &recordingSink{}
	n, advance := startNotifier(t, tenantPolicy(60), sink)
	enc, err := lifecycle.EncodeRecord(lifecycle.Record{Workload: "deployment-api-7f9c-x-1a2b3",
		Spec: berthv1.WorkloadSpec{QueueName: "chat", PodSets: []berthv1.PodSet{{Name: "main", Count: 1,
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}},
		Admission: berthv1.Admission{ClusterQueue: "serving", PodSetAssignments: []berthv1.PodSetAssignment{{
			Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	replica := func(name, uid, label string, restarts int32) *corev1.Pod {
		p := podWith(restarts, &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}, nil)
		p.Name, p.UID = name, types.UID(uid)
		p.Labels = map[string]string{berthv1.WorkloadLabel: label, berthv1.QueueNameLabel: "chat"}
		p.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: enc}
		return p
	}
	n.podUpdated(replica("api-7f9c-x", "pod-x", "pod-x", 0), replica("api-7f9c-x", "pod-x", "pod-x", 1))
	n.podUpdated(replica("forged", "pod-f", "wl-other", 0), replica("forged", "pod-f", "wl-other", 1))
	NewWithT(t).Eventually(collected(n)).Should(Equal(1))
	advance(func() bool { return len(sink.headlines()) == 1 })
	if got := sink.headlines()[0]; !strings.Contains(got, "Pod team-a/api-7f9c-x") || !strings.Contains(got, "OOM") {
		t.Errorf("headline %q, want the replica's pod OOM-killed", got)
	}
	if g := sink.got[0].Gang; g.ClusterQueue != "serving" || g.Flavor != "h200" || g.GPUsPerPod != 2 {
		t.Errorf("gang %+v, want the record's ClusterQueue, flavor and GPUs", g)
	}
	n.gangGone(replica("api-7f9c-x", "pod-x", "pod-x", 1))
	n.gangsMu.Lock()
	defer n.gangsMu.Unlock()
	if _, ok := n.gangs["pod-x"]; ok {
		t.Error("the gang of a replica whose pod is gone is kept")
	}
}
