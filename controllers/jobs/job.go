// Package jobs holds what every kind of job berth manages has in common: the
// GenericJob interface an adapter implements for its kind, and one
// reconciler that keeps a job and its Workload in step — it creates the
// Workload, keeps the job suspended until the Workload is admitted, starts it
// on the admitted flavors, stops it when the Workload is evicted, and
// reports when it finished. No kind is special-cased outside its adapter.
package jobs

import (
	"context"
	"k8s.io/apimachinery/pkg/types"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// PodSetScheduling is where the pods of one pod set may run: what berth adds
// to a pod set's template when it starts the job, and what it restores when
// it stops it.
type PodSetScheduling struct {
	// Name of the pod set.
	Name string `json:"name"`
	// NodeSelector of the pod template.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pod template.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Labels are berth's labels of the pod template: the berth.dev/workload
	// label on every admitted pod, and berth.dev/placement on the pods of a
	// gang placed in a topology domain, both holding the Workload's UID.
	// Only those keys are managed: the ones missing here are removed.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are berth's annotations of the pod template: the
	// consume-provisioning-request and provisioning-class-name annotations
	// of a gang admitted on booked capacity. Only those keys are managed:
	// the ones missing here are removed.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Count is the number of pods of the pod set the admission covers.
	// Kinds that release pods one by one (see package pods) never run
	// more than this many at once; it is not recorded in the job.
	Count int32 `json:"-"`
	// Placement is the part of NodeSelector the admission decides: its
	// flavors' node labels and its topology domain (AdmittedPlacement).
	// Kinds that release pods one by one release no pod whose own node
	// selector gives one of these keys another value, as a gated pod's
	// node selector can gain keys but not change them. Not recorded in
	// the job.
	Placement map[string]string `json:"-"`
	// ClusterQueue is the ClusterQueue that admitted the pod set. Kinds
	// that release pods one by one release no pod that tolerates another
	// queue's headroom taint. Not recorded in the job.
	ClusterQueue string `json:"-"`
}

// provisioningAnnotations are the pod annotations that make pods consume a
// ProvisioningRequest's booking.
var provisioningAnnotations = []string{
	autoscalingv1.ProvisioningRequestPodAnnotationKey,
	autoscalingv1.ProvisioningClassPodAnnotationKey,
}

// ProvisioningAnnotations returns berth's annotations among ann, nil when
// there are none.
func ProvisioningAnnotations(ann map[string]string) map[string]string {
	return pick(ann, provisioningAnnotations)
}

// startAnnotations are the annotations berth sets when it starts a gang:
// the booking's, and a replica's record (records.go).
var startAnnotations = append(slices.Clone(provisioningAnnotations), berthv1.AdmissionRecordAnnotation)

// SetAnnotations sets berth's annotations of a pod template to want: keys
// berth manages that want lacks are removed, others are left alone.
func SetAnnotations(ann, want map[string]string) map[string]string {
	return setManaged(ann, want, startAnnotations)
}

// managedLabels are the pod labels berth sets on admitted pods.
var managedLabels = []string{berthv1.WorkloadLabel, berthv1.PodSetLabel, berthv1.PlacementLabel, berthv1.SchedulingGroupLabel}

// ManagedLabels returns berth's labels among labels, nil when there are
// none.
func ManagedLabels(labels map[string]string) map[string]string {
	return pick(labels, managedLabels)
}

// SetLabels sets berth's labels of a pod template to want: keys berth
// manages that want lacks are removed, others are left alone.
func SetLabels(labels, want map[string]string) map[string]string {
	return setManaged(labels, want, managedLabels)
}

func pick(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func setManaged(m, want map[string]string, keys []string) map[string]string {
	for _, k := range keys {
		v, ok := want[k]
		switch {
		case ok:
			if m == nil {
				m = map[string]string{}
			}
			m[k] = v
		default:
			delete(m, k)
		}
	}
	return m
}

// GenericJob is one job, of any kind, as berth sees it. Methods that change
// the job change the in-memory object only; the reconciler writes it.
type GenericJob interface {
	// Object is the job's API object.
	Object() client.Object
	// PodSets describes the job's gang: one entry per group of identical
	// pods, with per-pod requests. An error says why the job cannot be
	// queued (for example zero pods), in words a user can act on.
	PodSets() ([]berthv1.PodSet, error)
	// IsSuspended reports whether the job is held: no pods are created.
	IsSuspended() bool
	// Suspend holds the job; its pods are deleted by its own controller.
	Suspend()
	// Resume releases the job.
	Resume()
	// Scheduling returns each pod set's current node selector and
	// tolerations.
	Scheduling() []PodSetScheduling
	// SetScheduling replaces the node selector and tolerations of the
	// named pod sets.
	SetScheduling(s []PodSetScheduling)
	// IsActive reports whether any pod of the job still runs.
	IsActive() bool
	// Finished reports whether the job ended, whether it succeeded, and a
	// message for the Workload's Finished condition.
	Finished() (finished, succeeded bool, message string)
	// PodTemplates returns the pod template of each pod set, in the order
	// of PodSets; berth reads priority classes and DRA claims from them.
	PodTemplates() []PodSetTemplate
}

// Members is implemented by a GenericJob whose pods are not all made from
// its current pod templates: a pod group's members, each its own spec, or
// the pods an older revision of a StatefulSet or LeaderWorkerSet made.
// berth releases every one of them, so each pod set is charged for its
// largest pod, what its DRA claims cost included, not for its template's
// claims alone.
type Members interface {
	// MemberSpecs returns, by pod set name, the pod specs the pod set is
	// charged for: its template's when its pods are made from one, and
	// those of its pods that PodSets counts.
	MemberSpecs() map[string][]*corev1.PodSpec
}

// PodSetTemplate is the pod template of one pod set.
type PodSetTemplate struct {
	// Name of the pod set.
	Name string
	// Labels the pods will carry that the job's kind knows of: the
	// template's, plus those its controller adds when it creates the pods
	// (the JobSet and replicated job names of a JobSet's pods, for
	// example), so that the pods' own affinity can be matched against them.
	Labels map[string]string
	// Spec of its pods.
	Spec *corev1.PodSpec
}

// Gang is implemented by a GenericJob that is one of several gangs of its
// object (a LeaderWorkerSet replica): its Workload is named after the object
// plus the suffix, so each gang is queued and admitted on its own.
type Gang interface {
	GenericJob
	// WorkloadSuffix tells the gang's Workload apart from its siblings'.
	WorkloadSuffix() string
}

// Writer is implemented by a GenericJob whose changes are not written by
// updating Object (pods released by removing a scheduling gate). The
// reconciler calls Write instead of Update after Suspend, Resume or
// SetScheduling.
type Writer interface {
	// Write persists the in-memory changes. It must be idempotent.
	Write(ctx context.Context, c client.Writer) error
}

// ChildVerifier is implemented by a parent Kind whose controller makes
// children berth must tell from forged ones (a JobSet's Jobs): a child's
// controller reference alone can be written by anyone who may create it.
type ChildVerifier interface {
	// IsChild reports whether child is one the parent's controller makes.
	IsChild(parent, child client.Object) bool
}

// Releaser is implemented by a Writer that releases a gang's pods one by
// one (see package pods) and may hold some back.
type Releaser interface {
	// Released is the number of pods the last Write released.
	Released() int
	// Held are the pods that claim the gang but stay gated: beyond the
	// admitted count, or not the gang's own.
	Held() []ExcludedPod
}

// Assumer is a gang whose writes the cache shows late: a gang of pods,
// each released by its own write. The reconciler keeps what the last
// writes returned and gives it back on the next pass, so that a pod whose
// cached copy predates its release is not released twice.
type Assumer interface {
	// Assume gives the gang the objects berth wrote earlier, by UID, with
	// the resourceVersion each write returned.
	Assume(written map[types.UID]string)
	// Written returns what to give the next Assume: the earlier writes the
	// cache still does not show, and those of the last Write.
	Written() map[types.UID]string
}

// ExcludedPod is a pod berth keeps gated although it claims a gang, and
// why, in words its owner can act on.
type ExcludedPod struct {
	// Name and UID of the pod.
	Name string
	UID  types.UID
	// Why it is not released.
	Why string
}

// Quiet is implemented by a GenericJob that is one replica of a serving
// object (a Deployment's or StatefulSet's pod). A scale-up of hundreds of
// replicas must not cost an API write per replica for each routine event,
// so the reconciler records none of them (queued, started) for such a
// gang; warnings, which say what to fix, stay. What a replica does is on
// its Workload, its pod, and kubectl berth explain.
type Quiet interface {
	// QuietEvents reports whether routine events are left out.
	QuietEvents() bool
}

// Watcher is implemented by a Kind whose gangs change with objects other
// than the job and its Workloads (a LeaderWorkerSet's pods).
type Watcher interface {
	// Watch adds watches to the reconciler's builder.
	Watch(ctx context.Context, mgr ctrl.Manager, b *builder.Builder) error
}

// Splitter is implemented by a Kind whose objects run several gangs, each
// with its own Workload. The reconciler deletes the object's Workloads
// whose gang no longer exists (scaled down), releasing their quota.
type Splitter interface {
	// Gangs returns the object's gangs; c reads what the gangs consist of
	// (for example pods).
	Gangs(ctx context.Context, c client.Reader, obj client.Object) ([]Gang, error)
}

// Kind creates the GenericJob of one kind of job.
type Kind interface {
	// GVK of the job kind.
	GVK() schema.GroupVersionKind
	// NewObject returns an empty object of the kind, to read into.
	NewObject() client.Object
	// Wrap returns the GenericJob of an object of the kind.
	Wrap(obj client.Object) GenericJob
}

// Loader is implemented by a Kind whose gang is not described by its
// object alone: a TrainJob's pods are those of the training runtime it
// names, another object. The reconciler builds the GenericJob of each of
// its objects with Load instead of Wrap, passing the manager's cached
// reader, so that the adapter can read what else describes the gang; Wrap
// still serves what needs the object only (a webhook's suspend check). An
// error of Load is retried. What the user must fix, such as a runtime that
// does not exist, is no error of Load's: the GenericJob's PodSets reports
// it, and the job is held and reported like any job berth cannot queue.
// Such a gang changes without its object's generation changing, so the
// reconciler reads it again on every event (see specMemo).
type Loader interface {
	// Load returns the GenericJob of obj, reading through c what else
	// describes its gang.
	Load(ctx context.Context, c client.Reader, obj client.Object) (GenericJob, error)
}

// Resolver is implemented by a Kind whose gang is not one object but
// several that share a key (a pod group: the pods with one group label).
// Its reconcile requests name the key, not an object. The gang's Workload
// carries the key in the berth.dev/job-key label and is owned, not
// controlled, by every member (see Owned), so the garbage collector deletes
// it with the last member; berth deletes it too once no member is left.
type Resolver interface {
	// Key returns the gang key of an object of the kind, and false when
	// berth does not manage the object.
	Key(obj client.Object) (string, bool)
	// Resolve returns the gang of a key, or nil when none of its objects
	// exists any more. c indexes the kind's objects by their Key under
	// KeyIndexKey, so a gang is found without reading its namespace.
	Resolve(ctx context.Context, c client.Reader, namespace, key string) (Gang, error)
}

// Owned is implemented by a GenericJob whose Workload has several owners
// instead of one controller (the pods of a pod group).
type Owned interface {
	// Owners are the owner references of the gang's Workload.
	Owners() []metav1.OwnerReference
}
