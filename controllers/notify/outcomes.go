package notify

import (
	"errors"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// DeliveryOutcome is how the last finished delivery of a policy's sink
// ended: what its Delivered condition says.
type DeliveryOutcome struct {
	// Reason is berthv1.ReasonDelivered, ReasonEgressRefused,
	// ReasonSinkRedirected or ReasonDeliveryFailed.
	Reason string
	// Message says what happened and what to do, without the sink's URL.
	Message string
}

// Delivered reports whether the sink took the report.
func (o DeliveryOutcome) Delivered() bool { return o.Reason == berthv1.ReasonDelivered }

// OutcomeOf classifies the error a delivery ended with (nil: delivered).
// Messages stay the same for the same cause, so a sink that keeps failing
// the same way does not rewrite its policy's status.
func OutcomeOf(err error) DeliveryOutcome {
	var ee *EgressError
	var se *SendError
	switch {
	case err == nil:
		return DeliveryOutcome{berthv1.ReasonDelivered, "the sink accepted the last report"}
	case errors.As(err, &ee):
		return DeliveryOutcome{berthv1.ReasonEgressRefused, "the last report was not sent: " + ee.Error()}
	case errors.As(err, &se) && se.Redirected():
		return DeliveryOutcome{berthv1.ReasonSinkRedirected, "the last report was not delivered: " + se.Error()}
	}
	return DeliveryOutcome{berthv1.ReasonDeliveryFailed, "the last report was not delivered: " + err.Error()}
}

// outcomes keeps the last outcome of each policy's deliveries, and hands
// a policy whose outcome changed to its controller, which writes it into
// the policy's status: the policy controllers are the only writers of
// policy status.
type outcomes struct {
	mu   sync.Mutex
	last map[string]DeliveryOutcome
	// namespaced and cluster carry the policies whose outcome changed to
	// the NotificationPolicy and ClusterNotificationPolicy controllers.
	namespaced, cluster chan event.GenericEvent
}

func newOutcomes() *outcomes {
	return &outcomes{last: map[string]DeliveryOutcome{},
		namespaced: make(chan event.GenericEvent, 256), cluster: make(chan event.GenericEvent, 256)}
}

// record keeps how a delivery of the policy ended; the dispatcher's
// workers call it.
func (o *outcomes) record(policy string, err error) {
	oc := OutcomeOf(err)
	o.mu.Lock()
	prev, seen := o.last[policy]
	o.last[policy] = oc
	o.mu.Unlock()
	if seen && prev == oc {
		return
	}
	var obj client.Object
	ch := o.cluster
	if ns, name, ok := strings.Cut(policy, "/"); ok {
		obj, ch = &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, o.namespaced
	} else {
		obj = &berthv1.ClusterNotificationPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}}
	}
	select {
	case ch <- event.GenericEvent{Object: obj}:
	default:
		// The controller is behind; the policy's periodic requeue writes
		// the outcome kept here.
	}
}

func (o *outcomes) get(policy string) (DeliveryOutcome, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	oc, ok := o.last[policy]
	return oc, ok
}

func (o *outcomes) forget(policy string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, policy)
}

// Outcome is how the last finished delivery of the policy's sink ended;
// false when none has since berth started leading or the policy was set.
func (n *Notifier) Outcome(policy string) (DeliveryOutcome, bool) { return n.outcomes.get(policy) }
