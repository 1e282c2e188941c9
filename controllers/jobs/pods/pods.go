// Package pods holds gangs of pods that berth holds with a scheduling gate
// instead of a suspend field: pod groups, LeaderWorkerSet replicas, and the
// replicas of Deployments and StatefulSets (serving.go tells those apart
// by their controllers). A labelled pod gets the berth.dev/admission gate
// when it is created (see Defaulter); berth removes it, adding the
// admitted flavor's node selector and tolerations, once the pod's gang is
// admitted. A pod cannot be gated again, so a gang is stopped by deleting
// its running pods: their owner (a ReplicaSet, a StatefulSet, or the user)
// creates them again, gated.
package pods

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// Gang is the pods of one gang and what berth is about to do to them.
// Adapters embed it and add PodSets, Object and the rest of GenericJob.
type Gang struct {
	// Pods are the gang's existing pods, sorted by name.
	Pods []corev1.Pod
	// PodSetOf names the pod set a pod belongs to.
	PodSetOf func(*corev1.Pod) string
	// Excluded are pods that claim to belong to the gang but that berth
	// does not count as its members (a pod group's pods beyond its count,
	// a pod whose owner is not the gang's): they are never released.
	Excluded []jobs.ExcludedPod

	scheduling map[string]jobs.PodSetScheduling
	resume     bool
	suspend    bool
	released   int
	held       []jobs.ExcludedPod
	// writes are the releases the cache may not show yet (assumed.go).
	writes releases
}

// IsGated reports whether the pod still waits for berth.
func IsGated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == berthv1.AdmissionGate
	})
}

// isTerminal reports whether the pod has ended.
func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// IsSuspended reports whether the gang is held: it has no pods yet, or one
// of them still carries the admission gate (pods created after the gang
// started are released by the next start).
func (g *Gang) IsSuspended() bool {
	if len(g.Pods) == 0 {
		return true
	}
	for i := range g.Pods {
		if g.gated(&g.Pods[i]) && g.Pods[i].DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// Suspend marks the gang's running pods for deletion by Write.
func (g *Gang) Suspend() { g.suspend, g.resume = true, false }

// Resume marks the gang's gated pods for release by Write.
func (g *Gang) Resume() { g.resume, g.suspend = true, false }

// SetScheduling records the node selector and tolerations Write gives the
// released pods.
func (g *Gang) SetScheduling(s []jobs.PodSetScheduling) {
	g.scheduling = map[string]jobs.PodSetScheduling{}
	for _, ps := range s {
		g.scheduling[ps.Name] = ps
	}
}

// IsActive reports whether a released pod still runs or terminates.
func (g *Gang) IsActive() bool {
	for i := range g.Pods {
		if p := &g.Pods[i]; !g.gated(p) && !isTerminal(p) {
			return true
		}
	}
	return false
}

// writeParallelism bounds the pods of one gang written at once. A gang's
// pods are independent objects; writing them one after another would make
// a gang of n pods wait n API round trips before kube-scheduler sees it.
const writeParallelism = 8

// Write releases or deletes pods as Resume or Suspend asked, several at
// once. Every pod is tried; the errors of all that failed are returned.
// It releases at most the admitted count of each pod set (see releasable).
func (g *Gang) Write(ctx context.Context, c client.Writer) error {
	var eg errgroup.Group
	eg.SetLimit(writeParallelism)
	errs := make([]error, len(g.Pods))
	written := make([]bool, len(g.Pods))
	release := map[int]bool{}
	if g.resume {
		for _, i := range g.releasable() {
			release[i] = true
		}
	}
	for i := range g.Pods {
		p := &g.Pods[i]
		switch {
		case release[i]:
			eg.Go(func() error {
				errs[i] = g.release(ctx, c, p)
				written[i] = errs[i] == nil
				return nil
			})
		case g.suspend && !g.gated(p) && !isTerminal(p) && p.DeletionTimestamp.IsZero():
			eg.Go(func() error {
				if err := c.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
					errs[i] = fmt.Errorf("deleting pod %s to stop its gang: %w", p.Name, err)
				}
				return nil
			})
		}
	}
	_ = eg.Wait() // the goroutines report through errs and written
	for i, w := range written {
		if w {
			g.writes.wrote(&g.Pods[i])
		}
	}
	return errors.Join(errs...)
}

// releasable picks the gated pods Write may release and records the ones
// it holds back. Admitted means bounded: per pod set, no more pods run at
// once than the admission counts, whatever pods a tenant adds to the gang
// while it runs. Pods already released and not ended count first; gated
// pods are taken oldest first, so a replacement is released before a later
// extra. A pod of a pod set the admission does not name is never released,
// nor one that would run outside the admission (misplaced), which takes no
// place from the pods behind it.
func (g *Gang) releasable() []int {
	running := map[string]int32{}
	var gated []int
	for i := range g.Pods {
		p := &g.Pods[i]
		switch {
		case g.gated(p) && p.DeletionTimestamp.IsZero():
			gated = append(gated, i)
		case !g.gated(p) && !isTerminal(p):
			running[g.PodSetOf(p)]++
		}
	}
	sort.SliceStable(gated, func(a, b int) bool { return Older(&g.Pods[gated[a]], &g.Pods[gated[b]]) })
	g.released, g.held = 0, nil
	var out []int
	for _, i := range gated {
		p := &g.Pods[i]
		set := g.PodSetOf(p)
		s, ok := g.scheduling[set]
		why := ""
		if ok {
			why = misplaced(p, s)
		}
		if why == "" && (!ok || running[set] >= s.Count) {
			why = "its pod set already runs every pod its admission counts"
		}
		if why != "" {
			g.held = append(g.held, jobs.ExcludedPod{Name: p.Name, UID: p.UID, Why: why})
			continue
		}
		running[set]++
		out = append(out, i)
	}
	g.released = len(out)
	return out
}

// Older orders pods by creation, then by name.
func Older(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// SchedulingGroup is the PodGroup name the gang's pods were created with
// (see Defaulter.SchedulingGroups), "" when none names one or they name
// different ones. A pod that names a group is not scheduled until the
// group exists, so one named pod is enough for berth to create it; a pod
// created before the hand-off was turned on names none and is scheduled
// on its own.
func (g *Gang) SchedulingGroup() string {
	name := ""
	for i := range g.Pods {
		sg := g.Pods[i].Spec.SchedulingGroup
		if sg == nil || sg.PodGroupName == nil {
			continue
		}
		if name != "" && *sg.PodGroupName != name {
			return ""
		}
		name = *sg.PodGroupName
	}
	return name
}

// Released is the number of pods the last Write released.
func (g *Gang) Released() int { return g.released }

// Held names the gated pods the last Write kept gated, because their pod
// set already runs its admitted count or because they would run outside
// the admission, and the pods the gang excludes.
func (g *Gang) Held() []jobs.ExcludedPod {
	return append(slices.Clone(g.Excluded), g.held...)
}

// release removes the gate and adds the pod set's node selector and
// tolerations. A gated pod may gain node selector keys and tolerations but
// not change existing ones, so only missing ones are added; the keys of the
// admission's placement are set whatever the pod had, so that a pod that
// gives one another value (releasable holds such a pod) is refused by the
// API server rather than released elsewhere.
//
// It patches rather than updates: kube-scheduler writes a gated pod's
// PodScheduled condition, so the cached pod is often a version behind, and
// an update would fail on the conflict and release the gang only after a
// retry. The strategic merge patch deletes berth's gate by name and adds
// only what berth adds.
func (g *Gang) release(ctx context.Context, c client.Writer, p *corev1.Pod) error {
	orig := p.DeepCopy()
	s := g.scheduling[g.PodSetOf(p)]
	set := func(k, v string) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
	for k, v := range s.NodeSelector {
		if _, ok := p.Spec.NodeSelector[k]; !ok {
			set(k, v)
		}
	}
	for k, v := range s.Placement {
		set(k, v)
	}
	for _, t := range s.Tolerations {
		if !slices.ContainsFunc(p.Spec.Tolerations, func(x corev1.Toleration) bool { return x.MatchToleration(&t) }) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, t)
		}
	}
	p.Labels = jobs.SetLabels(p.Labels, s.Labels)
	p.Annotations = jobs.SetAnnotations(p.Annotations, s.Annotations)
	p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool {
		return sg.Name == berthv1.AdmissionGate
	})
	if err := c.Patch(ctx, p, client.StrategicMergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing pod %s: %w", p.Name, err)
	}
	return nil
}

// Requests is the largest request of each resource over the pods, so a pod
// set whose members differ is charged for its largest member.
func Requests(ps []*corev1.Pod) corev1.ResourceList {
	specs := make([]*corev1.PodSpec, 0, len(ps))
	for _, p := range ps {
		specs = append(specs, &p.Spec)
	}
	return SpecRequests(specs)
}

// SpecRequests is Requests of pod specs: the largest request of each
// resource over them.
func SpecRequests(specs []*corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, spec := range specs {
		for name, q := range jobs.PodRequests(spec) {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q
			}
		}
	}
	return out
}

// The pod webhook is called for a pod whose labels ask for a gate it does
// not have yet, or name a scheduling group it has not joined: where the
// API server serves MutatingAdmissionPolicy, berth's pod-gate policy gates
// queued pods before any webhook runs, so they never call out. With the
// gang scheduling hand-off on, berth widens the condition to every queued
// pod at start (package podgate), as gated pods must join their gang's
// group here.
// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.berth.dev,admissionReviewVersions=v1,patch=`{"matchConditions":[{"name":"berth-pods","expression":"('berth.dev/scheduling-group' in object.metadata.?labels.orValue({}) && !object.spec.?schedulingGroup.hasValue()) || ('berth.dev/queue-name' in object.metadata.?labels.orValue({}) && !object.metadata.?ownerReferences.orValue([]).exists(r, r.kind == 'Job' && r.apiVersion.startsWith('batch/') && r.?controller.orValue(false)) && !object.spec.?schedulingGates.orValue([]).exists(g, g.name == 'berth.dev/admission'))"}]}`

// Defaulter gates every labelled pod at creation, so kube-scheduler does
// not place it before berth admits its gang. Pods of a Job are not gated:
// berth holds the Job itself through spec.suspend.
//
// It also names the scheduling.k8s.io PodGroup a pod joins, which can only
// be done at creation (spec.schedulingGroup is immutable): a pod labelled
// berthv1.SchedulingGroupLabel (berth labels the pod templates of admitted
// gangs so) joins the group the label names, and a gated pod joins the
// group SchedulingGroups names for its gang. A pod that already names a
// group keeps it.
type Defaulter struct {
	// SchedulingGroups names the PodGroup of a gated pod's gang, "" for a
	// pod that joins none; nil names none (gang scheduling hand-off off).
	SchedulingGroups func(context.Context, *corev1.Pod) string
}

// jobGroup is the API group of batch Jobs.
var jobGroup = schema.GroupKind{Group: "batch", Kind: "Job"}

// Default names the pod's scheduling group and adds the admission gate to
// a labelled pod not controlled by a Job.
func (d Defaulter) Default(ctx context.Context, p *corev1.Pod) error {
	if name := p.Labels[berthv1.SchedulingGroupLabel]; name != "" {
		joinGroup(p, name)
	}
	if _, ok := p.Labels[berthv1.QueueNameLabel]; !ok || jobPod(p) {
		return nil
	}
	// A pod may come gated already (its owner's template carries the
	// gate); it still joins its gang's group.
	if !IsGated(p) {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: berthv1.AdmissionGate})
	}
	if d.SchedulingGroups != nil {
		joinGroup(p, d.SchedulingGroups(ctx, p))
	}
	return nil
}

// jobPod reports whether a Job controls the pod.
func jobPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && ref.Controller != nil && *ref.Controller && gv.Group == jobGroup.Group && ref.Kind == jobGroup.Kind {
			return true
		}
	}
	return false
}

// joinGroup sets the pod's scheduling group to name unless it has one.
func joinGroup(p *corev1.Pod, name string) {
	if name == "" || p.Spec.SchedulingGroup != nil {
		return
	}
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch;delete
