package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// revisionAnnotation is the revision the Deployment controller writes on a
// Deployment and on each of its ReplicaSets: the new ReplicaSet's equals
// the Deployment's. berth's rollout swap tells new from old replicas by
// it, so explain does too.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// servingSet is what explain knows of a queued Deployment or StatefulSet
// (docs/serving.md): the Workloads of its replicas and what its pods say
// about the replicas that have none.
type servingSet struct {
	// ref names the object; each Workload is explained as one of its.
	ref       visv1.JobReference
	namespace string
	// queue is the object's berth.dev/queue-name.
	queue  string
	wanted int32
	// wholeSet is a StatefulSet annotated berth.dev/gang: set: one
	// Workload, owned by the StatefulSet, for all its pods.
	wholeSet  bool
	workloads []*berthv1.Workload
	// replicaOf names, by Workload UID, the pod that owns the Workload.
	replicaOf map[types.UID]string
	// pods counts the live pods of the object; unqueued those without the
	// queue label (created before the object was labelled); unseen the
	// released queued ones on neither a Workload nor a record berth counts.
	pods, unqueued, unseen int
	// recorded counts the replicas among workloads that run on the record
	// on their pod, without a Workload; waiting those that wait in the
	// queue without one.
	recorded, waiting int
	// rollout is a Deployment's rolling update, nil when none is under way.
	rollout *rolloutState
}

// rolloutState is where a Deployment's rolling update stands.
type rolloutState struct {
	revision string
	// newRS is the name of the ReplicaSet of the Deployment's revision.
	newRS string
	// updated and total count the live pods of the new ReplicaSet and of
	// all the Deployment's ReplicaSets.
	updated, total   int
	paused, recreate bool
	swap             *swapState
}

// swapState is a swap under way (docs/serving.md, "Rolling updates"): a
// gated surge pod marked berth.dev/swap-for and the old replica berth
// deletes to free its quota.
type swapState struct {
	surge, donor string
	// donorState is "gone", "terminating" or "running".
	donorState string
}

// serving reports whether explain finds the kind's Workloads through its
// pods rather than by their controller: the Workloads of Deployment and
// StatefulSet replicas are owned by the replicas' pods.
func (k explainKind) serving() bool { return k.group == appsv1.GroupName }

// findServing reads a queued Deployment or StatefulSet and the Workloads
// of its replicas, oldest first. It is an error, saying what to do, when
// the object does not exist or berth does not queue it.
func findServing(ctx context.Context, c client.Client, k explainKind, ns, name string) (*servingSet, error) {
	var obj client.Object = &appsv1.Deployment{}
	if k.kind == "StatefulSet" {
		obj = &appsv1.StatefulSet{}
	}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no %s %s in namespace %s: kubectl get %ss -n %s lists them", k.kind, name, ns, strings.ToLower(k.kind), ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", k.kind, ns, name, err)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if err := checkQueued(o, k.kind, o.Spec.Template.Labels); err != nil {
			return nil, err
		}
		return deploymentSet(ctx, c, o)
	case *appsv1.StatefulSet:
		if err := checkQueued(o, k.kind, o.Spec.Template.Labels); err != nil {
			return nil, err
		}
		return statefulSetSet(ctx, c, o)
	}
	return nil, fmt.Errorf("explain does not read %s objects through their pods", k.kind)
}

// checkQueued says how to opt in when the object is not labelled
// berth.dev/queue-name: berth queues only the replicas of labelled
// Deployments and StatefulSets, whatever their pod template says.
func checkQueued(o client.Object, kind string, template map[string]string) error {
	if _, ok := o.GetLabels()[berthv1.QueueNameLabel]; ok {
		return nil
	}
	lower := strings.ToLower(kind)
	note := ""
	if _, ok := template[berthv1.QueueNameLabel]; ok {
		note = fmt.Sprintf(" (its pod template has the label, but berth reads it on the %s)", kind)
	}
	return fmt.Errorf("%s/%s in namespace %s is not queued by berth: it is not labelled %s%s, so its pods run without Workloads, "+
		"outside any queue's quota. To queue its replicas, label the %s itself: kubectl label %s %s -n %s %s=LOCALQUEUE "+
		"(berth copies the label into its pod template, so the %s rolls out and its new pods are queued)",
		lower, o.GetName(), o.GetNamespace(), berthv1.QueueNameLabel, note,
		kind, lower, o.GetName(), o.GetNamespace(), berthv1.QueueNameLabel, kind)
}

func newServingSet(o client.Object, kind string, replicas *int32) *servingSet {
	return &servingSet{
		ref:       visv1.JobReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: kind, Name: o.GetName()},
		namespace: o.GetNamespace(),
		queue:     o.GetLabels()[berthv1.QueueNameLabel],
		wanted:    ptr.Deref(replicas, 1),
		replicaOf: map[types.UID]string{},
	}
}

// deploymentSet finds a Deployment's replicas: the pods of the
// ReplicaSets it controls, each by UID, as berth's webhook and controllers
// resolve them.
func deploymentSet(ctx context.Context, c client.Client, d *appsv1.Deployment) (*servingSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("reading the selector of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	list := &appsv1.ReplicaSetList{}
	if err := c.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the ReplicaSets of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	var rss []appsv1.ReplicaSet
	owned := map[types.UID]bool{}
	for _, rs := range list.Items {
		if controlledBy(&rs, d.UID) {
			rss = append(rss, rs)
			owned[rs.UID] = true
		}
	}
	all, err := podsOf(ctx, c, d.Namespace, sel, owned)
	if err != nil {
		return nil, fmt.Errorf("reading the replicas of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	s := newServingSet(d, "Deployment", d.Spec.Replicas)
	s.rollout = rolloutOf(d, rss, all)
	if err := s.collect(ctx, c, all, ""); err != nil {
		return nil, err
	}
	return s, nil
}

// statefulSetSet finds a StatefulSet's replicas: the pods it controls, by
// UID, and for a whole-set gang the Workload it owns itself.
func statefulSetSet(ctx context.Context, c client.Client, sts *appsv1.StatefulSet) (*servingSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("reading the selector of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	all, err := podsOf(ctx, c, sts.Namespace, sel, map[types.UID]bool{sts.UID: true})
	if err != nil {
		return nil, fmt.Errorf("reading the replicas of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	s := newServingSet(sts, "StatefulSet", sts.Spec.Replicas)
	s.wholeSet = sts.Annotations[berthv1.GangAnnotation] == berthv1.GangSet
	if err := s.collect(ctx, c, all, sts.UID); err != nil {
		return nil, err
	}
	return s, nil
}

// podsOf lists the pods of the selector whose controller is one of
// owners, by UID: a pod that merely matches the labels is not a replica.
func podsOf(ctx context.Context, c client.Client, ns string, sel labels.Selector, owners map[types.UID]bool) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && owners[ref.UID] {
			out = append(out, p)
		}
	}
	return out, nil
}

func controlledBy(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == uid
}

// live reports a pod that neither ended nor is being deleted: one the
// object counts as a replica.
func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == berthv1.AdmissionGate })
}

// collect keeps the namespace's serving Workloads owned by the pods, or by
// setUID for a whole-set StatefulSet, and counts the pods that have none.
// berth labels every such Workload with its gang key, which is the pod's
// name (not the object's), so ownership, not a label, ties them together.
func (s *servingSet) collect(ctx context.Context, c client.Client, all []corev1.Pod, setUID types.UID) error {
	owners := map[types.UID]string{}
	if setUID != "" {
		owners[setUID] = ""
	}
	for i := range all {
		owners[all[i].UID] = all[i].Name
	}
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls, client.InNamespace(s.namespace), client.HasLabels{berthv1.JobKeyLabel}); err != nil {
		return fmt.Errorf("listing the Workloads of namespace %s: %w", s.namespace, err)
	}
	withWorkload := map[string]bool{}
	for i := range wls.Items {
		wl := &wls.Items[i]
		for _, ref := range wl.OwnerReferences {
			if pod, ok := owners[ref.UID]; ok {
				s.workloads = append(s.workloads, wl)
				s.replicaOf[wl.UID] = pod
				withWorkload[pod] = true
				break
			}
		}
	}
	s.addRecords(all, withWorkload)
	s.addWaiting(all, withWorkload)
	for i := range all {
		p := &all[i]
		if !live(p) {
			continue
		}
		s.pods++
		_, queued := p.Labels[berthv1.QueueNameLabel]
		switch {
		case !queued:
			s.unqueued++
		case !s.wholeSet && !withWorkload[p.Name]:
			s.unseen++
		}
	}
	sortWorkloads(s.workloads)
	return nil
}

// addRecords adds, as admitted Workloads, the replicas that run on the
// record of their admission on their pod (berth.dev/admission-record)
// rather than on a Workload: berth admitted them at once and wrote only
// their release.
func (s *servingSet) addRecords(all []corev1.Pod, withWorkload map[string]bool) {
	for i := range all {
		p := &all[i]
		if !live(p) || withWorkload[p.Name] {
			continue
		}
		rec, has, err := lifecycle.RecordOf(p)
		if !has || err != nil {
			continue
		}
		wl := lifecycle.RecordedWorkload(p, rec)
		wl.Status.Conditions = []metav1.Condition{
			{Type: berthv1.ConditionQuotaReserved, Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonQuotaReserved), LastTransitionTime: p.CreationTimestamp},
			{Type: berthv1.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonAdmitted), LastTransitionTime: p.CreationTimestamp,
				Message: "admitted at once; the admission is recorded on the replica's pod (" + berthv1.AdmissionRecordAnnotation + "), which holds the quota until it ends"},
		}
		s.workloads = append(s.workloads, wl)
		s.replicaOf[wl.UID] = p.Name
		withWorkload[p.Name] = true
		s.recorded++
	}
}

// addWaiting adds, as pending Workloads, the gated replicas that wait in
// the queue without one: berth queues a replica on its own and writes a
// Workload only for one that needs a status (docs/serving.md). Each is
// named as its Workload would be, which is its name in the queue, so its
// line is found in the visibility API as a Workload's is.
func (s *servingSet) addWaiting(all []corev1.Pod, withWorkload map[string]bool) {
	if s.wholeSet {
		return
	}
	for i := range all {
		p := &all[i]
		if _, queued := p.Labels[berthv1.QueueNameLabel]; !queued || !live(p) || !gated(p) || withWorkload[p.Name] {
			continue
		}
		key := p.Name
		if len(key) > validation.LabelValueMaxLength {
			key = string(p.UID)
		}
		wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: lifecycle.KeyWorkloadName(s.ref.Kind, p.Namespace, key),
			UID: p.UID, CreationTimestamp: p.CreationTimestamp},
			Spec: berthv1.WorkloadSpec{QueueName: p.Labels[berthv1.QueueNameLabel], PodSets: []berthv1.PodSet{{Name: "main", Count: 1}}}}
		s.workloads = append(s.workloads, wl)
		s.replicaOf[wl.UID] = p.Name
		withWorkload[p.Name] = true
		s.waiting++
	}
}

// rolloutOf reads a Deployment's rolling update from its ReplicaSets and
// pods: nil when every live pod is of the new ReplicaSet and no swap is
// under way.
func rolloutOf(d *appsv1.Deployment, rss []appsv1.ReplicaSet, all []corev1.Pod) *rolloutState {
	r := &rolloutState{revision: d.Annotations[revisionAnnotation], paused: d.Spec.Paused,
		recreate: d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType}
	slices.SortFunc(rss, func(a, b appsv1.ReplicaSet) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var newUID types.UID
	for _, rs := range rss {
		if r.revision != "" && rs.Annotations[revisionAnnotation] == r.revision {
			newUID, r.newRS = rs.UID, rs.Name
			break
		}
	}
	byName := map[string]*corev1.Pod{}
	for i := range all {
		p := &all[i]
		byName[p.Name] = p
		if !live(p) {
			continue
		}
		r.total++
		isNew := controlledBy(p, newUID)
		if isNew {
			r.updated++
		}
		if donor := p.Annotations[berthv1.SwapAnnotation]; isNew && donor != "" && gated(p) {
			r.swap = &swapState{surge: p.Name, donor: donor}
		}
	}
	if r.swap != nil {
		switch donor := byName[r.swap.donor]; {
		case donor == nil:
			r.swap.donorState = "gone"
		case !donor.DeletionTimestamp.IsZero():
			r.swap.donorState = "terminating"
		default:
			r.swap.donorState = "running"
		}
	}
	if r.updated == r.total && r.swap == nil {
		return nil
	}
	return r
}

// describe makes an explained Workload one of the set's: explained as the
// Deployment's or StatefulSet's rather than as the pod group its gang key
// makes it look like, with the replica it stands for.
func (s *servingSet) describe(ex *explained) {
	ex.item.Job = s.ref
	switch pod := s.replicaOf[ex.wl.UID]; {
	case pod != "":
		ex.replica = "replica pod " + pod
	case s.wholeSet:
		ex.replica = "the whole set"
	}
}
