package setup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/batchjob"
	"github.com/berth-dev/berth/controllers/jobs/jobset"
	"github.com/berth-dev/berth/controllers/jobs/kubeflow"
	"github.com/berth-dev/berth/controllers/jobs/lws"
	"github.com/berth-dev/berth/controllers/jobs/podgroup"
	"github.com/berth-dev/berth/controllers/jobs/raycluster"
	"github.com/berth-dev/berth/controllers/jobs/rayjob"
	"github.com/berth-dev/berth/controllers/jobs/serving"
	"github.com/berth-dev/berth/controllers/jobs/trainjob"
)

// Part names a part of berth that Options.Parts selects. The core always
// runs; every other part is optional and needs nothing but the core unless
// its doc says so (Setup checks it).
type Part string

const (
	// Core is the scheduler (the admission engine, its loop and the
	// writer of its decisions), the Workload controller, the ClusterQueue
	// and LocalQueue controllers, berth's metrics, and the ResourceFlavor
	// and ClusterQueue webhooks. It is not optional: no workload is
	// admitted without all of it — the queue controllers give the engine
	// its quotas, the Workload controller its workloads, the scheduler
	// writes what it decides — and every other part feeds it or acts on
	// what it decided. Listed alone, it selects the core only.
	Core Part = "core"
	// Capacity feeds the engine the cluster's capacity: Nodes, the pods
	// bound to them, CapacityPools, and each ResourceFlavor's topology
	// levels and provisioning policy. Without it quota alone admits: a
	// workload that asks for a topology level waits with
	// UnknownTopologyLevel, and no flavor books capacity.
	Capacity Part = "capacity"
	// Provisioning carries out capacity bookings through
	// ProvisioningRequests, reports the API's availability on flavors and
	// checks a booked gang's pods-ready deadline. It requires Capacity: a
	// flavor's provisioning policy reaches the engine only through the
	// capacity's flavor controller, so without it no booking is decided.
	Provisioning Part = "provisioning"
	// Notify reports the failures of admitted gangs. It runs only when
	// Options.Notifications.Enabled, which in turn requires it.
	Notify Part = "notify"
	// Headroom keeps the warm capacity HeadroomPolicies ask for, as
	// cluster-autoscaler CapacityBuffers.
	Headroom Part = "headroom"
	// BatchJob queues batch/v1 Jobs: their controller and webhook.
	BatchJob Part = "batchjob"
	// JobSet queues JobSets: their controller and webhook.
	JobSet Part = "jobset"
	// LWS queues LeaderWorkerSets: their controller and webhook.
	LWS Part = "lws"
	// PodGroup queues groups of plain pods: their controller.
	PodGroup Part = "podgroup"
	// Deployment queues the replicas of Deployments, each a gang of one
	// pod: their controller, the rolling-update controller and webhooks.
	Deployment Part = "deployment"
	// StatefulSet queues the replicas of StatefulSets (a gang per ordinal,
	// or the whole set): their controller and webhooks.
	StatefulSet Part = "statefulset"
	// RayJob queues KubeRay RayJobs: their controller and webhook. It
	// requires RayCluster, whose webhook guards a RayJob's cluster.
	RayJob Part = "rayjob"
	// RayCluster queues KubeRay RayClusters (not those a RayJob makes):
	// their controller and webhook.
	RayCluster Part = "raycluster"
	// PyTorchJob queues the training-operator's PyTorchJobs: their
	// controller and webhook.
	PyTorchJob Part = "pytorchjob"
	// MPIJob queues the training-operator's MPIJobs (kubeflow.org/v1):
	// their controller and webhook.
	MPIJob Part = "mpijob"
	// TrainJob queues Kubeflow Trainer's TrainJobs: their controller and
	// webhook. It requires JobSet, whose webhooks guard a TrainJob's
	// JobSet: they leave it unheld as the TrainJob's child, and keep it
	// from running before, or beyond, the TrainJob's admission.
	TrainJob Part = "trainjob"
)

// AllParts are every part, in the order Setup registers them. A nil
// Options.Parts selects them all.
func AllParts() []Part {
	return []Part{Core, Capacity, Provisioning, Notify, Headroom, BatchJob, JobSet, LWS, PodGroup, Deployment, StatefulSet, RayJob, RayCluster, PyTorchJob, MPIJob,
		TrainJob}
}

// JobKinds are the parts that each queue one kind of job.
func JobKinds() []Part {
	return []Part{BatchJob, JobSet, LWS, PodGroup, Deployment, StatefulSet, RayJob, RayCluster, PyTorchJob, MPIJob, TrainJob}
}

// plan is what Setup registers for a selection of parts.
type plan struct {
	capacity     bool
	provisioning bool
	notify       bool
	headroom     bool
	// podGroups hands admitted gangs to kube-scheduler's gang scheduling
	// (Options.PodGroups).
	podGroups bool
	// deviceClasses counts DRA devices against quota (Options.DeviceClasses):
	// the pod webhook bounds a pod's claims by its gang's admission with it.
	deviceClasses jobs.DeviceClassMapping
	// kinds are the selected job kinds, in registration order.
	kinds []Part
}

// newPlan validates a selection (Options.Parts and whether notifications
// are enabled) and returns what it runs. Nil or empty parts select every
// part, as berth-controller runs; the core runs whatever is listed.
func newPlan(parts []Part, notifications bool) (plan, error) {
	if len(parts) == 0 {
		parts = AllParts()
	}
	var errs []error
	for i, p := range parts {
		if !slices.Contains(AllParts(), p) {
			errs = append(errs, fmt.Errorf("unknown part %q (known: %s)", p, partList(AllParts())))
		} else if slices.Contains(parts[:i], p) {
			errs = append(errs, fmt.Errorf("part %q listed twice", p))
		}
	}
	has := func(p Part) bool { return slices.Contains(parts, p) }
	if has(Provisioning) && !has(Capacity) {
		errs = append(errs, fmt.Errorf("part %q requires %q: a flavor's provisioning policy reaches the engine only through the capacity controllers", Provisioning, Capacity))
	}
	if has(RayJob) && !has(RayCluster) {
		errs = append(errs, fmt.Errorf("part %q requires %q: the RayCluster webhook keeps a queued RayJob's cluster from growing beyond its admission", RayJob, RayCluster))
	}
	if has(TrainJob) && !has(JobSet) {
		errs = append(errs, fmt.Errorf("part %q requires %q: the JobSet webhooks keep a queued TrainJob's JobSet within the TrainJob's admission", TrainJob, JobSet))
	}
	if notifications && !has(Notify) {
		errs = append(errs, fmt.Errorf("notifications are enabled but part %q is not selected", Notify))
	}
	if len(errs) > 0 {
		return plan{}, fmt.Errorf("invalid selection of berth's parts: %w", errors.Join(errs...))
	}
	p := plan{capacity: has(Capacity), provisioning: has(Provisioning), notify: has(Notify) && notifications, headroom: has(Headroom)}
	for _, k := range JobKinds() {
		if has(k) {
			p.kinds = append(p.kinds, k)
		}
	}
	return p, nil
}

// jobKinds returns the job kinds the plan queues.
func (p plan) jobKinds() []jobs.Kind {
	out := make([]jobs.Kind, 0, len(p.kinds))
	for _, k := range p.kinds {
		out = append(out, kindOf(k))
	}
	return out
}

// kindOf is the job kind a job kind part queues.
func kindOf(p Part) jobs.Kind {
	switch p {
	case BatchJob:
		return batchjob.Kind{}
	case JobSet:
		return jobset.Kind{}
	case LWS:
		return lws.Kind{}
	case Deployment:
		return serving.DeploymentKind{}
	case StatefulSet:
		return serving.StatefulSetKind{}
	case RayJob:
		return rayjob.Kind{}
	case RayCluster:
		return raycluster.Kind{}
	case PyTorchJob:
		return kubeflow.PyTorchJobKind{}
	case MPIJob:
		return kubeflow.MPIJobKind{}
	case TrainJob:
		return trainjob.Kind{}
	default:
		return podgroup.Kind{}
	}
}

// has reports whether the plan queues the job kind k.
func (p plan) has(k Part) bool { return slices.Contains(p.kinds, k) }

// Webhook handlers Setup registers, by the object they admit.
const (
	webhookResourceFlavor = "ResourceFlavor"
	webhookClusterQueue   = "ClusterQueue"
	webhookJob            = "Job"
	webhookJobSet         = "JobSet"
	webhookLWS            = "LeaderWorkerSet"
	webhookDeployment     = "Deployment"
	webhookStatefulSet    = "StatefulSet"
	webhookRayJob         = "RayJob"
	webhookRayCluster     = "RayCluster"
	webhookPyTorchJob     = "PyTorchJob"
	webhookMPIJob         = "MPIJob"
	webhookTrainJob       = "TrainJob"
	// webhookPodDefaulter gates queued pods at creation.
	webhookPodDefaulter = "Pod defaulter"
	// webhookPodValidator guards berth's labels on every admitted pod and
	// the queue label of queued ones.
	webhookPodValidator = "Pod validator"
)

// webhooks are the webhook handlers the plan registers. Each kind's
// webhook follows its kind, so that nothing is defaulted or refused for a
// controller that does not run. The pod validator runs with any kind:
// berth labels the pods of every kind it admits and it keeps others from
// forging those labels. The pod defaulter runs with the kinds whose pods
// berth holds with a scheduling gate (pod groups, LeaderWorkerSets,
// Deployments and StatefulSets):
// with neither, nothing would ever remove the gate it adds.
func (p plan) webhooks() []string {
	out := []string{webhookResourceFlavor, webhookClusterQueue}
	for _, k := range []struct {
		part Part
		name string
	}{{BatchJob, webhookJob}, {JobSet, webhookJobSet}, {LWS, webhookLWS}, {Deployment, webhookDeployment}, {StatefulSet, webhookStatefulSet},
		{RayJob, webhookRayJob}, {RayCluster, webhookRayCluster}, {PyTorchJob, webhookPyTorchJob}, {MPIJob, webhookMPIJob},
		{TrainJob, webhookTrainJob}} {
		if p.has(k.part) {
			out = append(out, k.name)
		}
	}
	if p.has(PodGroup) || p.has(LWS) || p.has(Deployment) || p.has(StatefulSet) {
		out = append(out, webhookPodDefaulter)
	}
	if len(p.kinds) > 0 {
		out = append(out, webhookPodValidator)
	}
	return out
}

func partList(parts []Part) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}
