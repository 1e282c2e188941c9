package notify

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// podWith is a bound pod with one container "train" in the given state.
func podWith(restarts int32, last *corev1.ContainerStateTerminated, waiting *corev1.ContainerStateWaiting, conds ...corev1.PodCondition) *corev1.Pod {
	cs := corev1.ContainerStatus{Name: "train", RestartCount: restarts, LastTerminationState: corev1.ContainerState{Terminated: last}}
	if waiting != nil {
		cs.State.Waiting = waiting
	} else {
		cs.State.Running = &corev1.ContainerStateRunning{}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-x-0", Namespace: "team-a"},
		Spec:       corev1.PodSpec{NodeName: "h200-0"},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}, Conditions: conds},
	}
}

func TestDetectPod(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	oom := &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}
	crash := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "segfault"}
	clbo := &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}
	pull := &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}
	backoff := &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}
	lost := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: "node gone"}
	preempted := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}
	cases := []struct {
		name     string
		old, pod *corev1.Pod
		want     []Failure
	}{
		{"a first sight reports nothing", nil, podWith(3, oom, nil), nil},
		{"no change", podWith(1, crash, nil), podWith(1, crash, nil), nil},
		{"an OOM kill", podWith(0, nil, nil), podWith(1, oom, nil),
			[]Failure{{Kind: OOMKilled, Reason: "OOMKilled", ExitCode: 137, Restarts: 1}}},
		{"a crash, then the back-off", podWith(0, nil, nil), podWith(1, crash, clbo), []Failure{
			{Kind: Restarted, Reason: "Error", ExitCode: 1, Message: "segfault", Restarts: 1},
			{Kind: CrashLoopBackOff, Reason: "CrashLoopBackOff", Message: clbo.Message, Restarts: 1},
		}},
		{"still crash-looping is not new", podWith(2, crash, clbo), podWith(2, crash, clbo), nil},
		{"an image that cannot be pulled", podWith(0, nil, nil), podWith(0, nil, pull),
			[]Failure{{Kind: ImagePullBackOff, Reason: "ErrImagePull", Message: "not found"}}},
		{"pull error turning into back-off is the same failure", podWith(0, nil, pull), podWith(0, nil, backoff), nil},
		{"lost with its node", podWith(0, nil, nil), podWith(0, nil, nil, lost),
			[]Failure{{Kind: NodeLost, Reason: "DeletionByPodGC", Message: "node gone"}}},
		{"a disruption that is not a lost node", podWith(0, nil, nil), podWith(0, nil, nil, preempted), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DetectPod(tc.old, tc.pod, now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d failures %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				w.Pod, w.Node, w.At = "train-x-0", "h200-0", now
				if w.Kind != NodeLost {
					w.Container = "train"
				}
				if got[i] != w {
					t.Errorf("failure %d = %+v, want %+v", i, got[i], w)
				}
			}
		})
	}
}

func TestUnscheduled(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pending := func(since time.Duration) *corev1.Pod {
		p := podWith(0, nil, nil, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
			LastTransitionTime: metav1.NewTime(now.Add(-since))})
		p.Spec.NodeName = ""
		return p
	}
	if f := Unscheduled(pending(time.Minute), 2*time.Minute, now); f != nil {
		t.Errorf("reported after 1 min with a grace of 2: %+v", f)
	}
	f := Unscheduled(pending(3*time.Minute), 2*time.Minute, now)
	if f == nil || f.Kind != Unschedulable || f.Message != "0/4 nodes are available: 4 Insufficient nvidia.com/gpu." {
		t.Errorf("Unscheduled = %+v, want the scheduler's message", f)
	}
	if f := Unscheduled(podWith(0, nil, nil), 0, now); f != nil {
		t.Errorf("a bound pod is reported: %+v", f)
	}
}

func TestDetectWorkload(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	wl := func(conds ...metav1.Condition) *berthv1.Workload {
		return &berthv1.Workload{Status: berthv1.WorkloadStatus{Conditions: conds}}
	}
	evicted := func(reason string) metav1.Condition {
		return metav1.Condition{Type: berthv1.ConditionEvicted, Status: metav1.ConditionTrue, Reason: reason, Message: "m"}
	}
	failed := metav1.Condition{Type: berthv1.ConditionFinished, Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonFailed), Message: "BackoffLimitExceeded"}
	reserved := metav1.Condition{Type: berthv1.ConditionQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"}
	booking := func(reason string) metav1.Condition {
		return metav1.Condition{Type: berthv1.ConditionQuotaReserved, Status: metav1.ConditionFalse, Reason: reason, Message: "m"}
	}
	succeeded := metav1.Condition{Type: berthv1.ConditionFinished, Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonSucceeded)}
	cases := []struct {
		name     string
		old, new *berthv1.Workload
		want     []Kind
	}{
		{"preempted", wl(), wl(evicted("Preempted")), []Kind{Evicted}},
		{"then requeued", wl(evicted("Preempted")), wl(evicted("Requeued")), []Kind{Requeued}},
		{"still evicted", wl(evicted("Preempted")), wl(evicted("Preempted")), nil},
		{"failed for good", wl(), wl(failed), []Kind{RetriesExhausted}},
		{"succeeded", wl(), wl(succeeded), nil},
		{"first sight", nil, wl(evicted("Preempted")), nil},
		{"a booking failed", wl(reserved), wl(booking("ProvisioningFailed")), []Kind{BookingFailed}},
		{"and then given up", wl(booking("ProvisioningFailed")), wl(booking("ProvisioningGaveUp")), []Kind{BookingFailed}},
		{"still failed", wl(booking("ProvisioningFailed")), wl(booking("ProvisioningFailed")), nil},
		{"waiting for quota is not a failure", wl(reserved), wl(booking("InsufficientQuota")), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DetectWorkload(tc.old, tc.new, now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want kinds %v", got, tc.want)
			}
			for i, k := range tc.want {
				if got[i].Kind != k {
					t.Errorf("failure %d is %s, want %s", i, got[i].Kind, k)
				}
			}
		})
	}
}
