package pods

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// The kinds whose replicas berth queues pod by pod: a Deployment (through
// the ReplicaSets it controls) and a StatefulSet.
const (
	DeploymentKind  = "Deployment"
	StatefulSetKind = "StatefulSet"
)

// WholeSetSuffix ends the gang key of a StatefulSet that is one gang
// (berth.dev/gang: set). The key of a per-replica gang is its pod's name,
// which for a StatefulSet ends in the ordinal's digits, so the two never
// collide.
const WholeSetSuffix = "-set"

// ServingKey returns the kind (DeploymentKind or StatefulSetKind) and gang
// key of a queued pod controlled by an apps/v1 ReplicaSet or StatefulSet,
// and false for every other pod (plain pods, a Job's, a LeaderWorkerSet's).
// A Deployment replica and a StatefulSet ordinal are gangs of one, keyed by
// the pod's name (its UID when the name is too long for a label value); the pods of a StatefulSet labelled berth.dev/gang: set
// share the key <set>-set. The key says which gang a pod claims; whether
// the claim holds is checked against its controllers (ServingController).
func ServingKey(p client.Object) (string, string, bool) {
	if _, queued := p.GetLabels()[berthv1.QueueNameLabel]; !queued {
		return "", "", false
	}
	if _, lws := p.GetLabels()[lwsv1.SetNameLabelKey]; lws {
		return "", "", false
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return "", "", false
	}
	switch ref.Kind {
	case "ReplicaSet":
		return DeploymentKind, podKey(p), true
	case StatefulSetKind:
		if p.GetLabels()[berthv1.GangAnnotation] == berthv1.GangSet {
			return StatefulSetKind, ref.Name + WholeSetSuffix, true
		}
		return StatefulSetKind, podKey(p), true
	}
	return "", "", false
}

// SetSchedulingGroup is the PodGroup a pod of a whole-set StatefulSet gang
// joins when berth hands gangs to kube-scheduler's gang scheduling, named
// from its set; "" for every other pod, a Deployment replica or a
// StatefulSet ordinal being a gang of one. A whole-set StatefulSet creates
// its pods in parallel (berth's webhook requires it), so a group of all of
// them can form.
func SetSchedulingGroup(_ context.Context, p *corev1.Pod) string {
	kind, key, ok := ServingKey(p)
	if !ok || kind != StatefulSetKind || !strings.HasSuffix(key, WholeSetSuffix) {
		return ""
	}
	return jobs.SchedulingGroupName("statefulset", strings.TrimSuffix(key, WholeSetSuffix))
}

// podKey is a replica's gang key: its pod's name, or its UID when the name
// is longer than a label value may be (the key is also the Workload's
// berth.dev/job-key label, and a long Deployment name makes pod names of
// up to 253 characters).
func podKey(p client.Object) string {
	if len(p.GetName()) <= validation.LabelValueMaxLength {
		return p.GetName()
	}
	return string(p.GetUID())
}

// Serving is what a pod's controllers resolve to: the queued Deployment or
// StatefulSet whose replica it is, and, for a Deployment, the ReplicaSet.
// When they do not resolve, Owner is nil and Why says why.
type Serving struct {
	// Owner is the queued Deployment or StatefulSet.
	Owner client.Object
	// ReplicaSet is the pod's ReplicaSet when Owner is a Deployment.
	ReplicaSet *appsv1.ReplicaSet
	// Why the pod is not a queued replica, in words its owner can act on.
	Why string
	// Missing is set when a controller was not found at all: the cache may
	// not have seen it yet, so a reconciler tries again later.
	Missing bool
}

// ServingController resolves the controllers of a queued pod to the
// Deployment or StatefulSet berth queues it for, each by name and UID: a
// ReplicaSet counts only when it is controlled by a Deployment that
// carries berth.dev/queue-name, a StatefulSet only when it carries the
// label itself. Anything else — a tenant's own ReplicaSet that copies a
// Deployment's pod labels, a ReplicaSet whose Deployment is gone or not
// queued — resolves to no Owner and a reason that says what to do. readers are
// tried in order (the cache, then the API server for objects the cache has
// not seen yet).
func ServingController(ctx context.Context, p *corev1.Pod, readers ...client.Reader) (Serving, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return Serving{Why: "it has no controller"}, nil
	}
	switch ref.Kind {
	case "ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		found, err := getByUID(ctx, readers, p.Namespace, ref, rs)
		if err != nil || !found {
			return Serving{Why: fmt.Sprintf("its ReplicaSet %q does not exist", ref.Name), Missing: true}, err
		}
		dref := metav1.GetControllerOf(rs)
		if dref == nil || dref.Kind != DeploymentKind || dref.APIVersion != appsv1.SchemeGroupVersion.String() {
			return Serving{Why: fmt.Sprintf("its ReplicaSet %q is not controlled by a Deployment: berth queues the pods of "+
				"Deployments labelled %s, not of ReplicaSets of their own; label a Deployment instead", ref.Name, berthv1.QueueNameLabel)}, nil
		}
		d := &appsv1.Deployment{}
		found, err = getByUID(ctx, readers, p.Namespace, dref, d)
		if err != nil || !found || !queued(d) {
			return Serving{Why: fmt.Sprintf("the Deployment %q of its ReplicaSet %q does not exist or is not labelled %s: "+
				"label the Deployment, not only its pods", dref.Name, ref.Name, berthv1.QueueNameLabel), Missing: !found}, err
		}
		return Serving{Owner: d, ReplicaSet: rs}, nil
	case StatefulSetKind:
		sts := &appsv1.StatefulSet{}
		found, err := getByUID(ctx, readers, p.Namespace, ref, sts)
		if err != nil || !found || !queued(sts) {
			return Serving{Why: fmt.Sprintf("its StatefulSet %q does not exist or is not labelled %s: "+
				"label the StatefulSet, not only its pod template", ref.Name, berthv1.QueueNameLabel), Missing: !found}, err
		}
		return Serving{Owner: sts}, nil
	}
	return Serving{Why: fmt.Sprintf("its controller %s %q is neither a ReplicaSet nor a StatefulSet", ref.Kind, ref.Name)}, nil
}

func queued(o client.Object) bool {
	_, ok := o.GetLabels()[berthv1.QueueNameLabel]
	return ok
}

// getByUID reads the object ref names into obj from the first reader that
// has it with ref's UID, and reports whether one did.
func getByUID(ctx context.Context, readers []client.Reader, namespace string, ref *metav1.OwnerReference, obj client.Object) (bool, error) {
	for _, r := range readers {
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("reading %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
		}
		if obj.GetUID() == ref.UID {
			return true, nil
		}
	}
	return false, nil
}

// Ordinal is a StatefulSet pod's ordinal, from its name (<set>-<ordinal>),
// and false when the name is not one of set's.
func Ordinal(set, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' || n > 1<<24 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
