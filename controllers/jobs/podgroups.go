package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// SchedulingGrouper is a job whose pods were named into a scheduling group
// when they were created (gated pods, see package pods): the PodGroup berth
// creates for the gang takes that name.
type SchedulingGrouper interface {
	// SchedulingGroup is the spec.schedulingGroup.podGroupName its pods
	// share, "" when they share none.
	SchedulingGroup() string
}

// OwnGang is a job whose own controller makes the PodGroup its pods join,
// from the job's spec: a batch Job with spec.scheduling, which kube-apiserver
// keeps only with the WorkloadWithJob gate on. berth makes no group of its
// own for such a job (its pods would never join it); it sets the gang's size
// in the job's spec at each start instead, and package handoff lowers it
// there once the gang is placed.
type OwnGang interface {
	// HasOwnGang reports whether the job's controller makes its group.
	HasOwnGang() bool
	// SetGangSize sets the gang minCount of the job's spec to pods when
	// the job asks for a gang.
	SetGangSize(pods int32)
}

// ownGang returns job as an OwnGang whose controller makes its group.
func ownGang(job GenericJob) (OwnGang, bool) {
	og, ok := job.(OwnGang)
	return og, ok && og.HasOwnGang()
}

// SchedulingGroupName is a PodGroup name made of parts: the parts joined
// by "-" when that is a valid name and a valid label value (≤ 63
// characters, so it can travel in berthv1.SchedulingGroupLabel), else the
// first part and a hash of all of them.
func SchedulingGroupName(parts ...string) string {
	name := strings.Join(parts, "-")
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := strings.ToLower(parts[0])
	const keep = validation.DNS1123LabelMaxLength - 11
	if len(prefix) > keep {
		prefix = prefix[:keep]
	}
	prefix = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, prefix), "-")
	return strings.TrimPrefix(prefix+"-"+hex.EncodeToString(sum[:])[:10], "-")
}

// handOff prepares an admitted gang for kube-scheduler's gang scheduling
// (Options.PodGroups): it creates the gang's PodGroup, with minCount the
// pods the admission counts, before the pods are released, and returns
// scheduling with the label that names the group on each pod template. A
// job whose controller makes its group (OwnGang) gets its gang's size set
// in its spec instead, written with the start.
// A gang of one pod has nothing to gang and gets no PodGroup; neither does
// a gang of gated pods created without a group name (before the option was
// on): their names cannot change.
func (r *Reconciler) handOff(ctx context.Context, job GenericJob, wl *berthv1.Workload, scheduling []PodSetScheduling) ([]PodSetScheduling, error) {
	var pods int32
	for _, s := range scheduling {
		pods += s.Count
	}
	if !r.opts.PodGroups || pods < 2 {
		return scheduling, nil
	}
	if og, ok := ownGang(job); ok {
		og.SetGangSize(pods)
		return scheduling, nil
	}
	name := r.podGroupName(job, wl)
	if name == "" {
		return scheduling, nil
	}
	if _, gated := job.(SchedulingGrouper); !gated {
		for i := range scheduling {
			scheduling[i].Labels[berthv1.SchedulingGroupLabel] = name
		}
	}
	_, gated := job.(SchedulingGrouper)
	return scheduling, r.ensurePodGroup(ctx, wl, name, pods, gated && !job.IsActive())
}

// podGroupName is the name of the gang's PodGroup: the one its gated pods
// carry, or one made from the Workload's name for kinds whose pods the
// job's operator creates once berth lets it.
func (r *Reconciler) podGroupName(job GenericJob, wl *berthv1.Workload) string {
	if g, ok := job.(SchedulingGrouper); ok {
		return g.SchedulingGroup()
	}
	return SchedulingGroupName(wl.Name)
}

// ensurePodGroup creates the PodGroup name for wl's gang of pods pods, or
// finds wl's own in place and sets its minCount to pods again: package
// handoff lowers it to one once the gang is placed, and a gang of gated
// pods keeps its group across an eviction (see dropPodGroup), so that the
// pods its owner creates again are placed whole again. A group being
// deleted (it stays while pods of the last run terminate) or left by
// another Workload of that name is not joined: pods that joined it would
// wait for a group that goes, or has the wrong size. The latter is
// deleted; either way the start is retried.
//
// held says that every pod of the gang still waits at berth's gate. Such
// pods name the group from their creation on, and kube-controller-manager
// keeps a deleted group while pods that name it have not ended: a group
// deleted under them (with an earlier Workload of the gang, or by hand)
// would never go, and the gang never start. No pod of it is scheduled, so
// berth lifts that protection itself and creates the group afresh.
func (r *Reconciler) ensurePodGroup(ctx context.Context, wl *berthv1.Workload, name string, pods int32, held bool) error {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: name,
			Labels:          map[string]string{berthv1.WorkloadLabel: string(wl.UID)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(wl, berthv1.GroupVersion.WithKind("Workload"))}},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: pods}},
		},
	}
	err := r.client.Create(ctx, pg)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating PodGroup %s of workload %s: %w", name, wl.Name, err)
		}
		return nil
	}
	old := &schedulingv1beta1.PodGroup{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(pg), old); err != nil {
		return fmt.Errorf("reading PodGroup %s of workload %s: %w", name, wl.Name, err)
	}
	switch {
	case !old.DeletionTimestamp.IsZero() && held:
		return r.lift(ctx, old, wl)
	case !old.DeletionTimestamp.IsZero():
		return fmt.Errorf("PodGroup %s of an earlier run of workload %s is still being deleted: starting it again once it is gone", name, wl.Name)
	case old.Labels[berthv1.WorkloadLabel] == string(wl.UID):
		return r.resetMinCount(ctx, old, pods)
	}
	if err := r.client.Delete(ctx, old, client.Preconditions{UID: ptr.To(old.UID)}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting PodGroup %s, which is not workload %s's: %w", name, wl.Name, err)
	}
	return fmt.Errorf("PodGroup %s was not workload %s's: deleted, starting the workload again once it is gone", name, wl.Name)
}

// podGroupProtection is kube-controller-manager's finalizer on PodGroups.
const podGroupProtection = "scheduling.k8s.io/podgroup-protection"

// lift removes the protection finalizer from a deleted group whose pods
// all wait at berth's gate, so that it goes, and asks for the start to be
// retried.
func (r *Reconciler) lift(ctx context.Context, pg *schedulingv1beta1.PodGroup, wl *berthv1.Workload) error {
	if slices.Contains(pg.Finalizers, podGroupProtection) {
		base := pg.DeepCopy()
		pg.Finalizers = slices.DeleteFunc(pg.Finalizers, func(f string) bool { return f == podGroupProtection })
		if err := r.client.Patch(ctx, pg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("lifting the protection of deleted PodGroup %s, whose pods all wait for berth: %w", pg.Name, err)
		}
	}
	return fmt.Errorf("PodGroup %s was deleted while workload %s's pods waited: starting it again once it is gone", pg.Name, wl.Name)
}

// resetMinCount sets the gang minCount of berth's own group pg to pods.
func (r *Reconciler) resetMinCount(ctx context.Context, pg *schedulingv1beta1.PodGroup, pods int32) error {
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount == pods {
		return nil
	}
	base := pg.DeepCopy()
	pg.Spec.SchedulingPolicy.Gang.MinCount = pods
	if err := r.client.Patch(ctx, pg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting the minCount of PodGroup %s to %d: %w", pg.Name, pods, err)
	}
	return nil
}

// dropPodGroup deletes the PodGroup of a gang that ends, or of a gang held
// through suspend that stops, so that its next admission starts a fresh
// group. A stopped gang of gated pods keeps its group: its owner creates
// the pods again at once, gated and naming the group (the name cannot
// change), and kube-controller-manager keeps a deleted group while pods
// that name it wait, so a deleted group would hold them for good. A gang
// whose group berth cannot name any more (its gated pods are gone) leaves
// it to the garbage collector, which deletes it with its Workload.
func (r *Reconciler) dropPodGroup(ctx context.Context, job GenericJob, wl *berthv1.Workload, ended bool) error {
	if !r.opts.PodGroups || admittedPods(wl) < 2 {
		return nil
	}
	if _, gated := job.(SchedulingGrouper); gated && !ended {
		return nil
	}
	if _, ok := ownGang(job); ok {
		return nil // its controller's group goes with the job
	}
	name := r.podGroupName(job, wl)
	if name == "" {
		return nil
	}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: name}}
	if err := r.client.Delete(ctx, pg); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting PodGroup %s of workload %s: %w", name, wl.Name, err)
	}
	return nil
}

// admittedPods counts the pods of wl's admission, 0 when it has none.
func admittedPods(wl *berthv1.Workload) int32 {
	var n int32
	if a := wl.Status.Admission; a != nil {
		for _, psa := range a.PodSetAssignments {
			n += psa.Count
		}
	}
	return n
}

// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups,verbs=get;create;patch;delete
