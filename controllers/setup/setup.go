// Package setup wires berth's controllers, admission loop and webhooks into a
// controller-runtime manager. The controller binary, the integration suites
// and the demo all start berth through it, so what is tested is what runs:
// the binary and the full-plane suites all of it, each integration suite
// the core and the parts it tests (Options.Parts, parts.go).
package setup

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/prometheus/client_golang/prometheus"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/admission"
	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/capacity"
	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/controllers/handoff"
	"github.com/berth-dev/berth/controllers/headroom"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/batchjob"
	"github.com/berth-dev/berth/controllers/jobs/jobset"
	"github.com/berth-dev/berth/controllers/jobs/kubeflow"
	"github.com/berth-dev/berth/controllers/jobs/lws"
	"github.com/berth-dev/berth/controllers/jobs/podgroup"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/jobs/raycluster"
	"github.com/berth-dev/berth/controllers/jobs/rayjob"
	"github.com/berth-dev/berth/controllers/jobs/serving"
	"github.com/berth-dev/berth/controllers/jobs/trainjob"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/notify"
	"github.com/berth-dev/berth/controllers/podgate"
	"github.com/berth-dev/berth/controllers/provisioning"
	"github.com/berth-dev/berth/controllers/queue"
	"github.com/berth-dev/berth/controllers/scheduler"
	"github.com/berth-dev/berth/controllers/workload"
)

// ControllerName is the name berth reports in events.
const ControllerName = "berth-controller"

// DefaultJobWorkers is how many jobs of each kind are reconciled at once
// unless Options.JobWorkers says otherwise (--job-workers). A reconcile
// spends its time waiting for the API server (a Workload's create, a
// gang's releases), so a kind's throughput is its workers divided by the
// API server's latency: when a burst saturates the API server, latency
// reaches a second and 16 workers fell behind 30 gangs a second
// (docs/performance.md, "Workers against API latency"). Idle workers
// cost nothing.
const DefaultJobWorkers = 64

// DefaultApplyWorkers is how many admission decisions are written at once
// unless Options.ApplyWorkers says otherwise (--apply-workers); see
// DefaultJobWorkers for why it is this many.
const DefaultApplyWorkers = scheduler.DefaultWorkers

// Options configure berth.
type Options struct {
	// Engine configures admission decisions.
	Engine admission.Options
	// StatusInterval is the most often a queue's counts and usage are
	// written.
	StatusInterval time.Duration
	// StatusRate is the most queue status writes per second per kind of
	// queue (queue.StatusLimits); zero sets no limit.
	StatusRate float64
	// Webhooks registers the admission webhooks with the manager's webhook
	// server.
	Webhooks bool
	// ApplyWorkers is how many decisions are written at once.
	ApplyWorkers int
	// JobWorkers is how many jobs of each kind are reconciled at once;
	// zero means DefaultJobWorkers. One would serialise every job's writes
	// (Workload create, one pod release per pod) behind each other, which
	// a burst of small gangs turns into minutes of waiting.
	JobWorkers int
	// MetricsRegistry receives berth's collectors; controller-runtime's
	// registry (served on the manager's metrics endpoint) when nil.
	MetricsRegistry prometheus.Registerer
	// PendingStatusDelay is how long a workload waits its turn before that
	// reason is written to its status; zero never writes it (see
	// scheduler.Options).
	PendingStatusDelay time.Duration
	// LocalQueueMetrics exports the per-LocalQueue series.
	LocalQueueMetrics bool
	// KindPollInterval is how often berth looks whether the cluster now
	// serves a job kind it did not serve at start; zero means
	// DefaultKindPollInterval.
	KindPollInterval time.Duration
	// DeviceClasses counts DRA devices, by DeviceClass, against quota.
	DeviceClasses jobs.DeviceClassMapping
	// Provisioning configures capacity bookings through
	// ProvisioningRequests.
	Provisioning provisioning.Options
	// Clock is the clock of every decision and status write: the engine's
	// time, condition transition times, the pods-ready deadline. The real
	// clock when nil; tests inject a fake one.
	Clock clock.PassiveClock
	// Notifications configures the failure reports of admitted gangs
	// (off unless Enabled; enabling them requires the Notify part).
	Notifications notify.Options
	// PodGroups hands every admitted gang of two or more pods to
	// kube-scheduler's gang scheduling through a scheduling.k8s.io/v1beta1
	// PodGroup, so that even binding is all or nothing (package
	// handoff). The cluster must serve PodGroups: Setup fails otherwise.
	PodGroups bool
	// NoReplicaRecords queues every Deployment replica and StatefulSet
	// ordinal with a Workload. By default one that fits at once is
	// admitted without one and released with a record of its admission on
	// its pod: one write per replica instead of three (docs/serving.md).
	// Records already on pods are honoured either way.
	NoReplicaRecords bool
	// PodGate names the pod webhook's configuration and the pod-gate
	// policy's binding (package podgate). An empty WebhookConfiguration is
	// certs.MutatingWebhookConfiguration, the install's name.
	PodGate podgate.Options
	// Headroom configures the headroom controller (the Headroom part): the
	// namespace and image of its placeholder pods.
	Headroom headroom.Options
	// Parts selects what runs besides the core (see Part); nil or empty
	// runs every part, which is what berth-controller runs. Suites list
	// the parts they test, so that a suite's plane runs no controller it
	// does not look at. An invalid selection (an unknown part, a part
	// without one it requires) fails Setup.
	Parts []Part
}

// Berth is a running berth: its scheduler, for callers that want to inspect
// decisions.
type Berth struct {
	// Scheduler owns the admission engine.
	Scheduler *scheduler.Scheduler
	// Metrics are berth's collectors.
	Metrics *metrics.Metrics
}

// Reconciler is the shape of every berth controller.
type Reconciler interface {
	Name() string
	Register(ctx context.Context, mgr ctrl.Manager) error
}

// Setup registers the core and the parts o.Parts selects with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Berth, error) {
	p, err := newPlan(o.Parts, o.Notifications.Enabled)
	if err == nil && o.PodGroups {
		p.podGroups, err = true, handoff.Served(mgr.GetRESTMapper())
	}
	if err != nil {
		return nil, err
	}
	p.deviceClasses = o.DeviceClasses
	if o.StatusInterval <= 0 {
		o.StatusInterval = 2 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Provisioning.Clock == nil {
		o.Provisioning.Clock = o.Clock
	}
	m := metrics.New()
	reg := cmp.Or[prometheus.Registerer](o.MetricsRegistry, ctrlmetrics.Registry)
	if err := m.Register(reg); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	recorder := mgr.GetEventRecorder(ControllerName)
	sched, reconcilers, err := core(ctx, mgr, o, p, m, recorder)
	if err != nil {
		return nil, err
	}
	if p.provisioning {
		reconcilers = append(reconcilers, provisioning.New(recorder, sched, o.Provisioning))
	}
	if p.headroom {
		reconcilers = append(reconcilers, headroom.New(mgr.GetClient(), mgr.GetAPIReader(), o.Clock, m, o.Headroom))
	}
	jobsOpts := jobs.Options{DeviceClasses: o.DeviceClasses, Parents: parentKinds(), Clock: o.Clock, Workers: cmp.Or(o.JobWorkers, DefaultJobWorkers),
		Changes: sched, PodGroups: p.podGroups, Records: sched, OfferReplicas: !o.NoReplicaRecords}
	if p.podGroups {
		reconcilers = append(reconcilers, handoff.New(mgr.GetClient(), mgr.GetAPIReader()))
	}
	if slices.Contains(p.webhooks(), webhookPodDefaulter) {
		gate := o.PodGate
		gate.WebhookConfiguration = cmp.Or(gate.WebhookConfiguration, certs.MutatingWebhookConfiguration)
		gate.HandOff = p.podGroups
		reconcilers = append(reconcilers, podgate.New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetRESTMapper(), m, gate))
	}
	kinds, missing, err := servedKinds(mgr, p.jobKinds()...)
	if err != nil {
		return nil, err
	}
	for _, k := range kinds {
		reconcilers = append(reconcilers, jobs.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), recorder, k, jobsOpts))
		if _, ok := k.(serving.DeploymentKind); ok {
			reconcilers = append(reconcilers, serving.NewRollouts(mgr.GetClient(), sched, recorder))
		}
	}
	if err := watchLateKinds(ctx, mgr, missing, recorder, jobsOpts, o.KindPollInterval); err != nil {
		return nil, err
	}
	for _, r := range reconcilers {
		if err := r.Register(ctx, mgr); err != nil {
			return nil, fmt.Errorf("registering %s controller: %w", r.Name(), err)
		}
	}
	if p.notify {
		if err := notify.Add(ctx, mgr, m, recorder, o.Notifications); err != nil {
			return nil, fmt.Errorf("setting up notifications: %w", err)
		}
	}
	if o.Webhooks {
		if err := registerWebhooks(mgr, p); err != nil {
			return nil, err
		}
	}
	return &Berth{Scheduler: sched, Metrics: m}, nil
}

// core creates the scheduler and adds it to mgr, and returns it with the
// core's reconcilers (Workloads, ClusterQueues, LocalQueues) and, when the
// plan has it, the capacity reconciler, which the scheduler waits for
// before its first cycle.
func core(ctx context.Context, mgr ctrl.Manager, o Options, p plan, m *metrics.Metrics, recorder events.EventRecorder) (*scheduler.Scheduler, []Reconciler, error) {
	var capacityRec *capacity.Reconciler
	so := scheduler.Options{Engine: o.Engine, Workers: o.ApplyWorkers, PendingStatusDelay: o.PendingStatusDelay, Metrics: m, Clock: o.Clock}
	if p.capacity {
		so.LoadCapacity = func(ctx context.Context) error { return capacityRec.Load(ctx) }
	}
	sched, err := scheduler.New(mgr.GetClient(), mgr.GetAPIReader(), recorder, so)
	if err != nil {
		return nil, nil, err
	}
	limits := queue.StatusLimits{Interval: o.StatusInterval, Rate: o.StatusRate}
	reconcilers := []Reconciler{
		workload.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), sched, recorder, o.Clock),
		queue.NewClusterQueueReconciler(mgr.GetClient(), sched, limits, m.Queues),
		queue.NewLocalQueueReconciler(mgr.GetClient(), sched, limits, m.Queues, o.LocalQueueMetrics),
	}
	if p.capacity {
		if capacityRec, err = capacity.New(ctx, mgr, sched, o.DeviceClasses, o.Headroom.Defaulted().Namespace); err != nil {
			return nil, nil, err
		}
		reconcilers = append(reconcilers, capacityRec)
	}
	if err := mgr.Add(sched); err != nil {
		return nil, nil, fmt.Errorf("adding scheduler: %w", err)
	}
	return sched, reconcilers, nil
}

// RegisterWebhooks registers the admission webhooks of the core and of
// the job kinds parts selects (nil: every part, as Options.Parts) with
// mgr's webhook server, which starts it. Setup does it when
// Options.Webhooks is set; a binary that must first wait for its
// certificate calls it later, with the same parts.
//
// podGroups is Options.PodGroups: the pod webhook then names the PodGroup
// of every gated gang's pods. deviceClasses is Options.DeviceClasses: the
// pod webhook counts a pod's DRA claims with it, as the job reconcilers
// charge them.
func RegisterWebhooks(mgr ctrl.Manager, parts []Part, podGroups bool, deviceClasses jobs.DeviceClassMapping) error {
	// Notifications play no part in which webhooks run.
	p, err := newPlan(parts, false)
	if err != nil {
		return err
	}
	p.podGroups, p.deviceClasses = podGroups, deviceClasses
	return registerWebhooks(mgr, p)
}

// podDefaulter is the pod webhook's defaulter: with the gang scheduling
// hand-off on, it names the PodGroup of the gated pods of pod groups,
// whole-set StatefulSets and (when berth runs that part) LeaderWorkerSet
// replicas, which it reads through r, when they are created. A Deployment
// replica or StatefulSet ordinal is a gang of one and joins none.
func podDefaulter(p plan, r client.Reader) pods.Defaulter {
	if !p.podGroups {
		return pods.Defaulter{}
	}
	namers := []func(context.Context, *corev1.Pod) string{podgroup.SchedulingGroup, pods.SetSchedulingGroup}
	if slices.Contains(p.kinds, LWS) {
		namers = append(namers, lws.SchedulingGroups(r))
	}
	return pods.Defaulter{SchedulingGroups: func(ctx context.Context, pod *corev1.Pod) string {
		for _, name := range namers {
			if n := name(ctx, pod); n != "" {
				return n
			}
		}
		return ""
	}}
}

// parentKinds are the kinds whose operators make child objects berth must
// recognise: a JobSet's Jobs, a RayJob's RayCluster and submitter Job, a
// TrainJob's JobSet. A child is covered by its parent's Workload
// (jobs.ParentOf); a TrainJob's JobSet's Jobs by the TrainJob's.
func parentKinds() []jobs.Kind { return []jobs.Kind{jobset.Kind{}, rayjob.Kind{}, trainjob.Kind{}} }

// registerWebhooks registers the webhooks of plan.webhooks.
func registerWebhooks(mgr ctrl.Manager, p plan) error {
	wls := jobs.Workloads{Cache: mgr.GetClient(), API: mgr.GetAPIReader()}
	parents := parentKinds()
	for _, name := range p.webhooks() {
		var err error
		switch name {
		case webhookResourceFlavor:
			err = ctrl.NewWebhookManagedBy(mgr, &berthv1.ResourceFlavor{}).WithValidator(queue.ResourceFlavorValidator{}).Complete()
		case webhookClusterQueue:
			err = ctrl.NewWebhookManagedBy(mgr, &berthv1.ClusterQueue{}).WithValidator(queue.ClusterQueueValidator{}).Complete()
		case webhookJob:
			err = ctrl.NewWebhookManagedBy(mgr, &batchv1.Job{}).WithDefaulter(batchjob.Defaulter{Gang: p.podGroups}).
				WithValidator(batchjob.Validator{Workloads: wls, Parents: parents}).Complete()
		case webhookJobSet:
			err = ctrl.NewWebhookManagedBy(mgr, &jobsetv1.JobSet{}).WithDefaulter(jobset.Defaulter{Readers: wls, Parents: parents}).
				WithValidator(jobset.Validator{Workloads: wls, Parents: parents}).Complete()
		case webhookLWS:
			err = ctrl.NewWebhookManagedBy(mgr, &lwsv1.LeaderWorkerSet{}).WithDefaulter(lws.Defaulter{}).
				WithValidator(lws.Validator{Workloads: wls}).Complete()
		case webhookDeployment:
			err = ctrl.NewWebhookManagedBy(mgr, &appsv1.Deployment{}).WithDefaulter(serving.DeploymentDefaulter{}).
				WithValidator(serving.DeploymentValidator{}).Complete()
		case webhookStatefulSet:
			err = ctrl.NewWebhookManagedBy(mgr, &appsv1.StatefulSet{}).WithDefaulter(serving.StatefulSetDefaulter{}).
				WithValidator(serving.StatefulSetValidator{}).Complete()
		case webhookRayJob:
			err = ctrl.NewWebhookManagedBy(mgr, &rayv1.RayJob{}).WithDefaulter(rayjob.Defaulter{}).
				WithValidator(rayjob.Validator{Workloads: wls}).Complete()
		case webhookRayCluster:
			err = ctrl.NewWebhookManagedBy(mgr, &rayv1.RayCluster{}).WithDefaulter(raycluster.Defaulter{Readers: wls, Parents: parents}).
				WithValidator(raycluster.Validator{Workloads: wls, Parents: parents}).Complete()
		case webhookPyTorchJob:
			k := kubeflow.PyTorchJobKind{}
			err = ctrl.NewWebhookManagedBy(mgr, &kftraining.PyTorchJob{}).WithDefaulter(kubeflow.Defaulter[*kftraining.PyTorchJob]{Kind: k}).
				WithValidator(kubeflow.Validator[*kftraining.PyTorchJob]{Kind: k, Workloads: wls}).Complete()
		case webhookMPIJob:
			k := kubeflow.MPIJobKind{}
			err = ctrl.NewWebhookManagedBy(mgr, &kftraining.MPIJob{}).WithDefaulter(kubeflow.Defaulter[*kftraining.MPIJob]{Kind: k}).
				WithValidator(kubeflow.Validator[*kftraining.MPIJob]{Kind: k, Workloads: wls}).Complete()
		case webhookTrainJob:
			err = ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).WithDefaulter(trainjob.Defaulter{}).
				WithValidator(trainjob.Validator{Workloads: wls}).Complete()
		case webhookPodDefaulter:
			err = ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).WithDefaulter(podDefaulter(p, mgr.GetClient())).Complete()
		case webhookPodValidator:
			err = ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).WithValidator(pods.Validator{Workloads: wls, Parents: parents, Owners: []jobs.Kind{raycluster.Kind{}},
				DeviceClasses: p.deviceClasses, Places: &pods.Places{}}).Complete()
		}
		if err != nil {
			return fmt.Errorf("registering %s webhook: %w", name, err)
		}
	}
	return nil
}

// servedKinds returns the job kinds whose API the cluster serves, and those
// it does not serve yet: a kind whose CRD is not installed (no JobSet
// operator) is not managed until it is (watchLateKinds), rather than
// failing berth.
func servedKinds(mgr ctrl.Manager, kinds ...jobs.Kind) ([]jobs.Kind, []jobs.Kind, error) {
	var served, missing []jobs.Kind
	for _, k := range kinds {
		gvk := k.GVK()
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				mgr.GetLogger().Info("job kind not served by the cluster yet; managing it once it is", "kind", gvk.String())
				missing = append(missing, k)
				continue
			}
			return nil, nil, fmt.Errorf("looking up %s: %w", gvk, err)
		}
		served = append(served, k)
	}
	return served, missing, nil
}

// watchLateKinds registers the cache indexes of the kinds not served yet
// and a runnable that registers their controllers once they are.
func watchLateKinds(ctx context.Context, mgr ctrl.Manager, missing []jobs.Kind, recorder events.EventRecorder, o jobs.Options, every time.Duration) error {
	if len(missing) == 0 {
		return nil
	}
	late := &lateKinds{mgr: mgr, interval: cmp.Or(every, DefaultKindPollInterval)}
	for _, k := range missing {
		r := jobs.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), recorder, k, o)
		if err := r.Index(ctx, mgr); err != nil {
			return fmt.Errorf("indexing for %s: %w", r.Name(), err)
		}
		late.pending = append(late.pending, r)
	}
	if err := mgr.Add(late); err != nil {
		return fmt.Errorf("adding the job kind watch: %w", err)
	}
	return nil
}

// AddToScheme registers the API types of every job kind berth manages, and
// the ProvisioningRequests it creates.
func AddToScheme(s *runtime.Scheme) error {
	if err := jobsetv1.AddToScheme(s); err != nil {
		return fmt.Errorf("registering JobSet types: %w", err)
	}
	if err := lwsv1.AddToScheme(s); err != nil {
		return fmt.Errorf("registering LeaderWorkerSet types: %w", err)
	}
	if err := kftraining.AddToScheme(s); err != nil {
		return fmt.Errorf("registering training-operator types: %w", err)
	}
	if err := rayv1.AddToScheme(s); err != nil {
		return fmt.Errorf("registering RayJob types: %w", err)
	}
	if err := trainer.AddToScheme(s); err != nil {
		return fmt.Errorf("registering TrainJob types: %w", err)
	}
	if err := autoscalingv1.AddToScheme(s); err != nil {
		return fmt.Errorf("registering ProvisioningRequest types: %w", err)
	}
	if err := cbv1beta1.AddToScheme(s); err != nil {
		return fmt.Errorf("registering CapacityBuffer types: %w", err)
	}
	return nil
}

// Leader election uses a Lease in berth's own namespace — client-go's
// lease lock only gets, creates and updates it (a release is an update) —
// and records a core/v1 Event there when the lease changes hands.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=berth-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=events,verbs=create;patch

// CacheOptions bound what berth's informers hold: of all Pods in the
// cluster, only those labelled with a queue name (pod groups, the pods of
// LeaderWorkerSets, Deployments and StatefulSets) matter to berth, so only those are cached; and no
// cached object keeps its managedFields, which berth never reads (its
// patches are computed from the cached copy, so they leave them alone,
// and its server-side applies build their own configurations).
func CacheOptions() (cache.Options, error) {
	queued, err := labels.NewRequirement(berthv1.QueueNameLabel, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, fmt.Errorf("building the pod cache selector: %w", err)
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*queued)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}, nil
}
