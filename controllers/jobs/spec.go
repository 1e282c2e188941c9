package jobs

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Options configure the job reconcilers.
type Options struct {
	// DeviceClasses counts DRA devices against quota.
	DeviceClasses DeviceClassMapping
	// Parents are the kinds berth manages whose children (a JobSet's Jobs)
	// must not be queued again on their own.
	Parents []Kind
	// Clock stamps Workload conditions; the real clock when nil.
	Clock clock.PassiveClock
	// Workers is how many jobs (or gangs of a resolved kind) are reconciled
	// at once; never the same one twice. Zero means 1.
	Workers int
	// PodGroups hands every admitted gang of two or more pods to
	// kube-scheduler's gang scheduling: a scheduling.k8s.io/v1beta1
	// PodGroup is created before its pods are released and deleted when it
	// stops or ends (see podgroups.go). The cluster must serve PodGroups.
	PodGroups bool
	// IncompleteGrace is how long a gang may lack members before berth
	// warns about it (GroupIncomplete, SetIncomplete): members that arrive
	// one by one, as a burst creates them, are not a problem to report.
	// DefaultIncompleteGrace when zero.
	IncompleteGrace time.Duration
	// Changes is told when an admitted job changed under its admission:
	// the engine decides the eviction and the scheduler writes it. Required.
	Changes ChangeReporter
	// Records keeps the quota of replicas recorded on their pods; a pod
	// that carries a record runs on it whether or not OfferReplicas is on.
	Records Records
	// OfferReplicas admits a Deployment replica or StatefulSet ordinal
	// that fits at once without a Workload: released with its record, it
	// costs one write (the release patch). One that must wait is queued
	// with a Workload. Needs Records.
	OfferReplicas bool
}

// DefaultIncompleteGrace is Options.IncompleteGrace unless set.
const DefaultIncompleteGrace = 10 * time.Second

// ChangeReporter feeds the engine what changed in job, the job of an
// admitted workload; the eviction is told on job. *scheduler.Scheduler
// implements it.
type ChangeReporter interface {
	ReportChange(key admission.WorkloadKey, c admission.Change, job runtime.Object)
}

// maxPodSetResources is the Workload API's limit on the resources of one
// pod set: a job over it is reported, not retried against the API server.
const maxPodSetResources = 32

// maxRequest is the largest per-pod request the admission engine counts.
var maxRequest = resource.NewMilliQuantity(admission.MaxAmount, resource.DecimalSI)

// gangSpec is the part of a Workload's spec a job determines.
type gangSpec struct {
	podSets           []berthv1.PodSet
	priority          int32
	priorityClassName string
	topology          *berthv1.TopologyRequest
}

// equals reports whether a Workload spec holds exactly this gang.
func (g gangSpec) equals(s *berthv1.WorkloadSpec) bool {
	return equality.Semantic.DeepEqual(g.podSets, s.PodSets) && g.priority == s.Priority &&
		g.priorityClassName == s.PriorityClassName && equality.Semantic.DeepEqual(g.topology, s.Topology)
}

// spec computes the Workload spec of a job: its pod sets with what their
// DRA claims cost, and its priority. An *InvalidError says what the user
// must fix.
func (r *Reconciler) spec(ctx context.Context, job GenericJob) (gangSpec, error) {
	podSets, err := job.PodSets()
	if err != nil {
		if isInvalid(err) {
			return gangSpec{}, err
		}
		return gangSpec{}, &InvalidError{msg: err.Error()}
	}
	templates := job.PodTemplates()
	ns := job.Object().GetNamespace()
	own := ownScheduling(job)
	var members map[string][]*corev1.PodSpec
	if m, ok := job.(Members); ok {
		members = m.MemberSpecs()
	}
	for i := range podSets {
		specs, perMember := members[podSets[i].Name]
		if perMember {
			if podSets[i].Requests, err = r.opts.DeviceClasses.largestRequests(ctx, r.client, ns, specs, podSets[i].Requests); err != nil {
				return gangSpec{}, uncounted(err)
			}
		}
		for _, t := range templates {
			if t.Name != podSets[i].Name || t.Spec == nil {
				continue
			}
			if !perMember {
				if podSets[i].Requests, err = r.opts.DeviceClasses.ClaimRequests(ctx, r.client, ns, t.Spec, podSets[i].Requests); err != nil {
					return gangSpec{}, err
				}
			}
			if podSets[i].Template, err = schedulingTemplate(t, own[t.Name]); err != nil {
				return gangSpec{}, err
			}
		}
	}
	for i := range podSets {
		if n := len(podSets[i].Requests); n > maxPodSetResources {
			return gangSpec{}, Invalid("pod set %q requests %d resources; a Workload holds at most %d per pod set: request fewer resource names",
				podSets[i].Name, n, maxPodSetResources)
		}
		for name, q := range podSets[i].Requests {
			if q.Cmp(*maxRequest) > 0 {
				return gangSpec{}, Invalid("pod set %q requests %s of %s per pod, more than berth can count (%.3g): request less",
					podSets[i].Name, q.String(), name, maxRequest.AsApproximateFloat64())
			}
		}
	}
	out := gangSpec{podSets: podSets}
	if out.topology, err = topologyRequest(job.Object().GetAnnotations()); err != nil {
		return gangSpec{}, err
	}
	out.priorityClassName = job.Object().GetLabels()[berthv1.PriorityClassLabel]
	if out.priorityClassName == "" {
		for _, t := range templates {
			if t.Spec != nil && t.Spec.PriorityClassName != "" {
				out.priorityClassName = t.Spec.PriorityClassName
				break
			}
		}
	}
	if out.priorityClassName != "" {
		pc := &schedulingv1.PriorityClass{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: out.priorityClassName}, pc); err != nil {
			if apierrors.IsNotFound(err) {
				return gangSpec{}, Invalid("PriorityClass %q does not exist: create it or remove the reference", out.priorityClassName)
			}
			return gangSpec{}, fmt.Errorf("reading PriorityClass %s: %w", out.priorityClassName, err)
		}
		out.priority = pc.Value
	}
	return out, nil
}

// InvalidError is an error in a job that the user must fix; the reconciler
// reports it as a warning event and does not retry (a change of the job
// requeues it).
type InvalidError struct {
	msg string
	// reason of the event; EventInvalidJob when empty.
	reason string
	// incomplete marks a gang that misses members it is expected to get
	// back (a pod group whose lost pod is being replaced): a running gang
	// keeps its admission meanwhile, as its pods are bounded by it.
	incomplete bool
	// uncounted marks a gang one of whose pods claims what berth cannot
	// count (a ResourceClaimTemplate that does not exist yet): a running
	// gang keeps its admission, but releases no gated pod, which would run
	// with whatever its claims come to ask for.
	uncounted bool
}

func (e *InvalidError) Error() string { return e.msg }

// Invalid returns an InvalidError reported as InvalidJob.
func Invalid(format string, args ...any) error {
	return &InvalidError{msg: fmt.Sprintf(format, args...)}
}

// InvalidWithReason returns an InvalidError reported with its own event
// reason. Events of one object with one reason are aggregated with the
// first note kept, so a condition users must tell apart (a pod group still
// waiting for members) needs its own reason.
func InvalidWithReason(reason, format string, args ...any) error {
	return &InvalidError{msg: fmt.Sprintf(format, args...), reason: reason}
}

// Incomplete returns an InvalidError for a gang that lacks members, with
// its own event reason: a gang that has not started is not queued, and a
// running one keeps its admission until the members are back.
func Incomplete(reason, format string, args ...any) error {
	return &InvalidError{msg: fmt.Sprintf(format, args...), reason: reason, incomplete: true}
}

// uncounted marks err, an *InvalidError about a pod's claims, as uncounted;
// other errors are returned as they are.
func uncounted(err error) error {
	var ie *InvalidError
	if !errors.As(err, &ie) {
		return err
	}
	out := *ie
	out.uncounted = true
	return &out
}

// isUncounted reports whether err is about claims berth cannot count.
func isUncounted(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie) && ie.uncounted
}

// isIncomplete reports whether err is an Incomplete error.
func isIncomplete(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie) && ie.incomplete
}

// isInvalid reports whether err is the user's to fix.
func isInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims;resourceclaimtemplates,verbs=get;list;watch

// topologyRequest reads a job's topology annotations. Whether the level
// exists is the flavor's business: the engine reports an unknown level on
// the Workload (UnknownTopologyLevel), where the user sees it next to the
// flavor's levels.
func topologyRequest(ann map[string]string) (*berthv1.TopologyRequest, error) {
	req, hasReq := ann[berthv1.TopologyRequiredAnnotation]
	pref, hasPref := ann[berthv1.TopologyPreferredAnnotation]
	switch {
	case hasReq && hasPref:
		return nil, Invalid("set only one of the %s and %s annotations", berthv1.TopologyRequiredAnnotation, berthv1.TopologyPreferredAnnotation)
	case hasReq:
		if req == "" {
			return nil, Invalid("annotation %s must name a topology level (a node label key of the flavor's topologyLevels)", berthv1.TopologyRequiredAnnotation)
		}
		return &berthv1.TopologyRequest{Mode: berthv1.TopologyRequired, Level: req}, nil
	case hasPref:
		if pref == "" {
			return nil, Invalid("annotation %s must name a topology level (a node label key of the flavor's topologyLevels)", berthv1.TopologyPreferredAnnotation)
		}
		return &berthv1.TopologyRequest{Mode: berthv1.TopologyPreferred, Level: pref}, nil
	}
	return nil, nil
}
