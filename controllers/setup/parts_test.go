package setup

import (
	"slices"
	"strings"
	"testing"

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

// planCase is a selection of parts and what newPlan makes of it.
type planCase struct {
	name          string
	parts         []Part
	notifications bool
	want          plan
	webhooks      []string
	err           string
}

// planCases are the selections TestNewPlan tries.
func planCases() []planCase {
	every := []string{webhookResourceFlavor, webhookClusterQueue, webhookJob, webhookJobSet, webhookLWS,
		webhookDeployment, webhookStatefulSet, webhookRayJob, webhookRayCluster, webhookPyTorchJob, webhookMPIJob, webhookTrainJob,
		webhookPodDefaulter, webhookPodValidator}
	coreHooks := []string{webhookResourceFlavor, webhookClusterQueue}
	return []planCase{
		{name: "nil selects everything, as berth-controller runs", parts: nil, notifications: true,
			want:     plan{capacity: true, provisioning: true, notify: true, kinds: JobKinds()},
			webhooks: every},
		{name: "empty selects everything", parts: []Part{},
			want:     plan{capacity: true, provisioning: true, kinds: JobKinds()},
			webhooks: every},
		{name: "notify selected runs only when notifications are enabled", parts: AllParts(), notifications: false,
			want:     plan{capacity: true, provisioning: true, kinds: JobKinds()},
			webhooks: every},
		{name: "core alone", parts: []Part{Core},
			want: plan{}, webhooks: coreHooks},
		{name: "the core runs without being listed", parts: []Part{BatchJob},
			want:     plan{kinds: []Part{BatchJob}},
			webhooks: append(slices.Clone(coreHooks), webhookJob, webhookPodValidator)},
		{name: "kinds in registration order whatever the listed order", parts: []Part{PodGroup, BatchJob},
			want:     plan{kinds: []Part{BatchJob, PodGroup}},
			webhooks: append(slices.Clone(coreHooks), webhookJob, webhookPodDefaulter, webhookPodValidator)},
		{name: "LeaderWorkerSets need the pod defaulter for their gated pods", parts: []Part{LWS},
			want:     plan{kinds: []Part{LWS}},
			webhooks: append(slices.Clone(coreHooks), webhookLWS, webhookPodDefaulter, webhookPodValidator)},
		{name: "Deployments need the pod defaulter for their gated pods", parts: []Part{Deployment},
			want:     plan{kinds: []Part{Deployment}},
			webhooks: append(slices.Clone(coreHooks), webhookDeployment, webhookPodDefaulter, webhookPodValidator)},
		{name: "StatefulSets need the pod defaulter for their gated pods", parts: []Part{StatefulSet},
			want:     plan{kinds: []Part{StatefulSet}},
			webhooks: append(slices.Clone(coreHooks), webhookStatefulSet, webhookPodDefaulter, webhookPodValidator)},
		{name: "JobSets without batch Jobs", parts: []Part{Core, JobSet},
			want:     plan{kinds: []Part{JobSet}},
			webhooks: append(slices.Clone(coreHooks), webhookJobSet, webhookPodValidator)},
		{name: "provisioning with capacity", parts: []Part{Capacity, Provisioning, BatchJob},
			want:     plan{capacity: true, provisioning: true, kinds: []Part{BatchJob}},
			webhooks: append(slices.Clone(coreHooks), webhookJob, webhookPodValidator)},
		{name: "notify with notifications enabled", parts: []Part{Notify, BatchJob}, notifications: true,
			want:     plan{notify: true, kinds: []Part{BatchJob}},
			webhooks: append(slices.Clone(coreHooks), webhookJob, webhookPodValidator)},
		{name: "RayJobs with RayClusters, whose webhook guards a RayJob's cluster", parts: []Part{RayJob, RayCluster},
			want:     plan{kinds: []Part{RayJob, RayCluster}},
			webhooks: append(slices.Clone(coreHooks), webhookRayJob, webhookRayCluster, webhookPodValidator)},
		{name: "RayJobs without RayClusters", parts: []Part{RayJob},
			err: `part "rayjob" requires "raycluster"`},
		{name: "TrainJobs with JobSets, whose webhooks guard a TrainJob's JobSet", parts: []Part{TrainJob, JobSet},
			want:     plan{kinds: []Part{JobSet, TrainJob}},
			webhooks: append(slices.Clone(coreHooks), webhookJobSet, webhookTrainJob, webhookPodValidator)},
		{name: "TrainJobs without JobSets", parts: []Part{TrainJob},
			err: `part "trainjob" requires "jobset"`},
		{name: "provisioning without capacity", parts: []Part{Provisioning, BatchJob},
			err: `part "provisioning" requires "capacity"`},
		{name: "notifications enabled without notify", parts: []Part{BatchJob}, notifications: true,
			err: `notifications are enabled but part "notify" is not selected`},
		{name: "unknown part", parts: []Part{"batchjobs"},
			err: `unknown part "batchjobs"`},
		{name: "part listed twice", parts: []Part{BatchJob, Capacity, BatchJob},
			err: `part "batchjob" listed twice`},
	}
}

// TestNewPlan: which controllers and webhooks a selection of parts runs,
// and which selections are refused and why.
func TestNewPlan(t *testing.T) {
	for _, tc := range planCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newPlan(tc.parts, tc.notifications)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.capacity != tc.want.capacity || got.provisioning != tc.want.provisioning || got.notify != tc.want.notify ||
				!slices.Equal(got.kinds, tc.want.kinds) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
			if hooks := got.webhooks(); !slices.Equal(hooks, tc.webhooks) {
				t.Errorf("webhooks = %q, want %q", hooks, tc.webhooks)
			}
		})
	}
}

// TestJobKinds: each job kind part queues its own kind, so that selecting
// a part starts the controller of the kind it names.
func TestJobKinds(t *testing.T) {
	p, err := newPlan(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobs.Kind{batchjob.Kind{}, jobset.Kind{}, lws.Kind{}, podgroup.Kind{}, serving.DeploymentKind{}, serving.StatefulSetKind{}, rayjob.Kind{}, raycluster.Kind{},
		kubeflow.PyTorchJobKind{}, kubeflow.MPIJobKind{}, trainjob.Kind{}}
	got := p.jobKinds()
	if len(got) != len(want) {
		t.Fatalf("kinds = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].GVK() != want[i].GVK() {
			t.Errorf("kind %d (%s) = %s, want %s", i, p.kinds[i], got[i].GVK(), want[i].GVK())
		}
	}
}
