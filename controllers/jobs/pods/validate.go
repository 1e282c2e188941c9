package pods

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// The pod webhook is called only for what needs berth's state, so that
// the API server evaluates everything else in-process (matchConditions,
// docs/admission-path.md): pods that carry the queue-name label or one of
// the labels berth puts on admitted pods (a pod cannot pass for a member
// of an admitted gang), not updated by berth itself or by whoever else may
// write Workload status (cluster administrators), and then only a create
// that names a controller, carries berth's gang labels or has a malformed
// queue name, or an update that removes berth's gate or changes a queued
// pod's labels or controller.
//
// A gated pod that kube-controller-manager's ReplicaSet or StatefulSet
// controller creates (a Deployment's or StatefulSet's replica, a
// LeaderWorkerSet's pod) does not call out at creation although it names
// a controller: it runs only once berth releases it, and the release
// follows its controllers by UID (ServingController, the LeaderWorkerSet
// ownership check), so the create-time lookup only moved a refusal
// earlier. Without it every replica of a scale-up waited for a round trip
// to berth inside the controller's few create workers. A pod whose chain
// does not lead to a queued set stays gated, with an InvalidJob warning
// saying what to label; a pod naming such a controller that anyone else
// creates still calls out and is refused (validateController).
// +kubebuilder:webhook:path=/validate--v1-pod,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create;update,versions=v1,name=vpod.berth.dev,admissionReviewVersions=v1,patch=`{"matchConditions":[{"name":"berth-pods","expression":"(has(object.metadata.labels) && ['berth.dev/queue-name', 'berth.dev/workload', 'berth.dev/placement'].exists(k, k in object.metadata.labels)) || (request.operation == 'UPDATE' && (has(oldObject.metadata.labels) && ['berth.dev/queue-name', 'berth.dev/workload', 'berth.dev/placement'].exists(k, k in oldObject.metadata.labels))) || 'berth.dev/admission-record' in object.metadata.?annotations.orValue({}) || (request.operation == 'UPDATE' && 'berth.dev/admission-record' in oldObject.metadata.?annotations.orValue({}))"},{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"},{"name":"needs-lookup","expression":"request.operation == 'CREATE' ? (object.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false) && !(r.apiVersion == 'apps/v1' && r.kind in ['ReplicaSet', 'StatefulSet'] && object.spec.?schedulingGates.orValue([]).exists(g, g.name == 'berth.dev/admission') && (request.userInfo.username in ['system:kube-controller-manager', 'system:serviceaccount:kube-system:replicaset-controller', 'system:serviceaccount:kube-system:statefulset-controller'] || (has(request.userInfo.groups) && 'system:masters' in request.userInfo.groups)))) || ['berth.dev/workload', 'berth.dev/placement'].exists(k, k in object.metadata.?labels.orValue({})) || (object.metadata.?labels.orValue({})[?'berth.dev/queue-name'].hasValue() && (size(object.metadata.?labels.orValue({})[?'berth.dev/queue-name'].value()) > 253 || !object.metadata.?labels.orValue({})[?'berth.dev/queue-name'].value().matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))) || 'berth.dev/admission-record' in object.metadata.?annotations.orValue({})) : (oldObject.metadata.?annotations.orValue({})[?'berth.dev/admission-record'] != object.metadata.?annotations.orValue({})[?'berth.dev/admission-record'] || (oldObject.spec.?schedulingGates.orValue([]).exists(g, g.name == 'berth.dev/admission') && !object.spec.?schedulingGates.orValue([]).exists(g, g.name == 'berth.dev/admission')) || ['berth.dev/queue-name', 'berth.dev/pod-group', 'berth.dev/gang', 'berth.dev/workload', 'berth.dev/placement', 'berth.dev/pod-set'].exists(k, oldObject.metadata.?labels.orValue({})[?k] != object.metadata.?labels.orValue({})[?k]) || oldObject.metadata.?ownerReferences.orValue([]).filter(r, r.?controller.orValue(false)).map(r, r.uid) != object.metadata.?ownerReferences.orValue([]).filter(r, r.?controller.orValue(false)).map(r, r.uid))"}]}`

// Validator refuses the pods and pod edits that would run a pod outside
// quota: removing berth's scheduling gate before the pod's gang is
// admitted, a controller reference that takes a queued pod out of its
// group, berth's own labels set by anyone but berth, and moving a pod to
// another queue or group.
type Validator struct {
	// Workloads reads the gangs' Workloads.
	Workloads jobs.Workloads
	// Parents are the kinds whose Jobs berth queues through their parent.
	Parents []jobs.Kind
	// Owners are the queued kinds whose operator creates their pods
	// directly (a RayCluster's): a pod they control belongs to their gang.
	Owners []jobs.Kind
	// DeviceClasses counts DRA devices against quota, as the job
	// reconcilers do: a pod created into an admitted gang is bounded by its
	// claims' devices too. Nil counts none.
	DeviceClasses jobs.DeviceClassMapping
	// Places answers the count of a pod set's requests one at a time; one
	// per process, shared by the webhook's copies of the Validator. Nil
	// counts each request alone (unit tests that make one at a time).
	Places *Places
}

// places is v.Places, or a fresh one when unset.
func (v Validator) places() *Places {
	if v.Places != nil {
		return v.Places
	}
	return &Places{}
}

var _ admission.Validator[*corev1.Pod] = Validator{}

var (
	labelsPath = field.NewPath("metadata", "labels")
	specPath   = field.NewPath("spec")
	ownersPath = field.NewPath("metadata", "ownerReferences")
	gatesPath  = field.NewPath("spec", "schedulingGates")
	// controllerUsers may create pods that name a controller: the
	// identities kube-controller-manager's Job and StatefulSet controllers
	// use, with or without --use-service-account-credentials (the
	// ReplicaSet controller creates a Deployment's pods). Cluster
	// administrators (system:masters) may too.
	controllerUsers = []string{
		"system:kube-controller-manager",
		"system:serviceaccount:kube-system:job-controller",
		"system:serviceaccount:kube-system:statefulset-controller",
		"system:serviceaccount:kube-system:replicaset-controller",
	}
)

var podKind = corev1.SchemeGroupVersion.WithKind("Pod").GroupKind()

// ValidateCreate checks a new pod's queue name, controller and berth labels.
func (v Validator) ValidateCreate(ctx context.Context, p *corev1.Pod) (admission.Warnings, error) {
	errs := append(jobs.ValidateQueueName(p.Labels), ValidateRecord(nil, p)...)
	if _, queued := p.Labels[berthv1.QueueNameLabel]; queued {
		ctrlErrs, err := v.validateController(ctx, p)
		if err != nil {
			return nil, err
		}
		errs = append(errs, ctrlErrs...)
	}
	if len(errs) == 0 && hasGangLabels(p) {
		switch {
		case IsGated(p):
			errs = append(errs, gangLabelsForbidden(p, "a pod berth still holds"))
		case metav1.GetControllerOf(p) == nil:
			// Only a job's controller creates pods with them, copied from
			// the template berth resumed the job with; berth gives them to
			// a pod group's members when it releases them. A pod made with
			// them by hand carries no queue label, so berth's own count of
			// the group, which reads only queued pods, would not see it.
			errs = append(errs, gangLabelsForbidden(p, "a pod created with them and without a controller: "+
				"a pod group's members are created gated, with the queue label, and berth labels them when it releases them"))
		default:
			wl, labelErrs, err := v.validateGangLabels(ctx, p)
			if err != nil {
				return nil, err
			}
			// Created ungated (by a Job's, a JobSet's, an operator's
			// controller): shaped like the gang's pods, and bounded at
			// creation as a gated pod is at its release.
			if len(labelErrs) == 0 {
				if labelErrs, err = v.validateShape(ctx, p, wl); err != nil {
					return nil, err
				}
			}
			if len(labelErrs) == 0 {
				if labelErrs, err = validateBound(ctx, v.places(), v.Workloads.API, p, wl, false); err != nil {
					return nil, err
				}
			}
			errs = append(errs, labelErrs...)
		}
	}
	return nil, jobs.Refusal(podKind, p.Name, errs)
}

// ValidateUpdate checks what a pod update may change: not the queue or the
// group, not the controller, and the gate and berth's labels only as berth
// changes them when it releases the pod.
func (v Validator) ValidateUpdate(ctx context.Context, old, p *corev1.Pod) (admission.Warnings, error) {
	errs := append(ValidateUpdateStatic(old, p), ValidateRecord(old, p)...)
	released := IsGated(old) && !IsGated(p)
	relabelled := old.Labels[berthv1.WorkloadLabel] != p.Labels[berthv1.WorkloadLabel] ||
		old.Labels[berthv1.PlacementLabel] != p.Labels[berthv1.PlacementLabel]
	if len(errs) == 0 && (released || (relabelled && hasGangLabels(p))) {
		wl, labelErrs, err := v.validateGangLabels(ctx, p)
		if err != nil {
			return nil, err
		}
		// A gate removed by the tenant rather than by berth: the pod must be
		// shaped like its pod set's pods, as one created into the gang must.
		if released && len(labelErrs) == 0 {
			if labelErrs, err = v.validateShape(ctx, p, wl); err != nil {
				return nil, err
			}
		}
		if released && len(labelErrs) == 0 {
			if labelErrs, err = validateBound(ctx, v.places(), v.Workloads.Cache, p, wl, true); err != nil {
				return nil, err
			}
		}
		if released && len(labelErrs) > 0 {
			labelErrs = field.ErrorList{field.Forbidden(gatesPath, fmt.Sprintf(
				"the %s gate is removed by berth when the pod's gang is admitted, not before: leave it (%s)",
				berthv1.AdmissionGate, labelErrs.ToAggregate().Error()))}
		}
		errs = append(errs, labelErrs...)
	}
	return nil, jobs.Refusal(podKind, p.Name, errs)
}

// ValidateDelete allows every deletion.
func (Validator) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

// countedLabels are the labels by which berth counts the pods a gang runs
// (validateBound, the release's own bound) and trusts a replica's record
// (lifecycle.RecordOf). berth sets them with the release; a tenant who
// could remove or change one on a running pod would take that pod out of
// the count — and release one more pod of the gang in its place — or make
// a restarted berth not count the quota a replica's record holds.
var countedLabels = []string{berthv1.WorkloadLabel, berthv1.PlacementLabel, berthv1.PodSetLabel}

// ValidateUpdateStatic checks the changes of a pod that need no lookup: the
// labels berth counts a gang's pods by cannot change once set, on any pod
// (countedLabels: a Job's pods carry them without the queue label); a
// queued pod's queue and group cannot change, nor can its controller be
// set or replaced (removing it, as the garbage collector does when the
// controller is deleted with orphan propagation, is allowed).
func ValidateUpdateStatic(old, p *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	released := IsGated(old) && !IsGated(p)
	_, queued := old.Labels[berthv1.QueueNameLabel]
	if released && !queued && hasGangLabels(p) {
		// berth gates only queued pods, and counts a pod group's members
		// among the queued pods it caches: a pod gated by its creator and
		// released into a gang would run beside a count that never sees it.
		errs = append(errs, field.Forbidden(gatesPath, fmt.Sprintf(
			"berth releases into a gang only the pods it queued (labelled %s); this pod was not: delete it and create it with the label",
			berthv1.QueueNameLabel)))
	}
	for _, key := range countedLabels {
		ov, had := old.Labels[key]
		nv, has := p.Labels[key]
		switch {
		case had && (!has || nv != ov):
			errs = append(errs, field.Forbidden(labelsPath.Key(key),
				"berth sets it when it releases the pod and counts the pods a gang runs by it: it cannot be changed or removed: leave it to berth (deleting the pod takes it out of its gang)"))
		case !had && has && !released:
			// Added to a pod that is not being released: a running pod
			// pulled into a gang, or one whose usage berth's capacity
			// model would leave to the engine, past the release's count.
			errs = append(errs, field.Forbidden(labelsPath.Key(key),
				"berth sets it when it releases the pod, in the same write that removes its gate: it cannot be added to a pod otherwise: leave it to berth"))
		}
	}
	if !queued {
		return errs
	}
	for _, key := range []string{berthv1.QueueNameLabel, berthv1.PodGroupLabel, berthv1.GangAnnotation} {
		ov, oldOK := old.Labels[key]
		nv, newOK := p.Labels[key]
		if oldOK != newOK || ov != nv {
			errs = append(errs, field.Forbidden(labelsPath.Key(key),
				"cannot be changed or removed on a queued pod: delete the pod and create it again"))
		}
	}
	if oc, nc := metav1.GetControllerOf(old), metav1.GetControllerOf(p); nc != nil && (oc == nil || oc.UID != nc.UID) {
		errs = append(errs, field.Forbidden(ownersPath,
			"the controller of a queued pod cannot be set or replaced: it would take the pod out of its gang"))
	}
	return errs
}

// ValidateRecord refuses a replica's quota record
// (berthv1.AdmissionRecordAnnotation) on a new pod (old is nil) and any
// change of it: berth writes it with the release, and a pod's quota is
// counted from it after a restart, so a record a tenant could write,
// change or remove would be quota berth counts wrongly. Requests that
// reach this check are not berth's (its own updates never call out).
func ValidateRecord(old, p *corev1.Pod) field.ErrorList {
	v, has := p.Annotations[berthv1.AdmissionRecordAnnotation]
	what := "set on a new pod"
	if old != nil {
		ov, had := old.Annotations[berthv1.AdmissionRecordAnnotation]
		if had == has && ov == v {
			return nil
		}
		what = "set, changed or removed"
	} else if !has {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(berthv1.AdmissionRecordAnnotation),
		"berth writes it when it releases a replica, as the record of the quota the replica holds; it cannot be "+what+": leave it to berth")}
}

// validateController checks who controls a new queued pod. berth queues
// plain pods (no controller) as pod groups, and the pods of the Jobs and
// LeaderWorkerSets it queues; a pod whose controller is anything else, or
// is a Job berth does not hold, would run outside every gang.
func (v Validator) validateController(ctx context.Context, p *corev1.Pod) (field.ErrorList, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, nil
	}
	if !createdByController(ctx) {
		return field.ErrorList{field.Forbidden(ownersPath, fmt.Sprintf(
			"a queued pod that names controller %s %q must be created by that controller: "+
				"remove the controller ownerReference to queue the pod as a pod group", ref.Kind, ref.Name))}, nil
	}
	switch {
	case ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String():
		job, err := v.job(ctx, p.Namespace, ref)
		if err != nil || job != nil {
			return nil, err
		}
		return field.ErrorList{field.Forbidden(ownersPath, fmt.Sprintf(
			"controller Job %q does not exist or is not queued by berth (no %s label, no queued parent): label the Job, not only its pods",
			ref.Name, berthv1.QueueNameLabel))}, nil
	case isReplicaPod(p, ref):
		return nil, nil
	}
	if _, _, ok := ServingKey(p); ok {
		s, err := ServingController(ctx, p, v.Workloads.Cache, v.Workloads.API)
		if err != nil || s.Owner != nil {
			return nil, err
		}
		return field.ErrorList{field.Forbidden(ownersPath, "berth does not queue this pod: "+s.Why)}, nil
	}
	return field.ErrorList{field.Forbidden(ownersPath, fmt.Sprintf(
		"berth queues pods without a controller (pod groups) and the pods of the Jobs, LeaderWorkerSets, Deployments and StatefulSets it queues; "+
			"controller %s %q is neither: remove the %s label or the controller ownerReference", ref.Kind, ref.Name, berthv1.QueueNameLabel))}, nil
}

// createdByController reports whether the request comes from
// kube-controller-manager or a cluster administrator.
func createdByController(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false
	}
	return slices.Contains(controllerUsers, req.UserInfo.Username) || slices.Contains(req.UserInfo.Groups, "system:masters")
}

// job returns the Job ref names when berth queues it, itself or through
// its parent (a JobSet's Jobs need not carry the label), nil otherwise.
func (v Validator) job(ctx context.Context, namespace string, ref *metav1.OwnerReference) (*batchv1.Job, error) {
	for _, r := range []client.Reader{v.Workloads.Cache, v.Workloads.API} {
		job := &batchv1.Job{}
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, job)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading Job %s/%s: %w", namespace, ref.Name, err)
		}
		if job.UID != ref.UID {
			continue
		}
		if _, queued := job.Labels[berthv1.QueueNameLabel]; queued {
			return job, nil
		}
		parent, _, err := jobs.ParentOf(ctx, r, job, v.Parents)
		if err != nil || parent != nil {
			return job, err
		}
	}
	return nil, nil
}

// controllerWorkload names the Workload of the gang whose pods the
// controller ref names creates: the controller's own when it is a queued
// object of one of v.Owners (a RayCluster), or that of the queued parent
// whose child it is (the RayCluster of a RayJob); "" when it is neither,
// or berth may not read it. Only the controller's metadata is read, from
// the API server: it is consulted only for pods with berth's gang labels.
func (v Validator) controllerWorkload(ctx context.Context, namespace string, ref *metav1.OwnerReference) (string, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", nil //nolint:nilerr // a malformed reference names no gang of berth's
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gv.WithKind(ref.Kind))
	err = v.Workloads.API.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading %s %s/%s, controller of the pod: %w", ref.Kind, namespace, ref.Name, err)
	case obj.UID != ref.UID:
		return "", nil
	}
	parent, kind, err := jobs.ParentOf(ctx, v.Workloads.Cache, obj, v.Parents)
	switch {
	case err != nil:
		return "", err
	case parent != nil:
		return jobs.WorkloadName(kind.GVK().Kind, parent), nil
	}
	if _, queued := obj.Labels[berthv1.QueueNameLabel]; queued {
		for _, k := range v.Owners {
			if k.GVK().GroupKind() == gv.WithKind(ref.Kind).GroupKind() {
				return jobs.WorkloadName(k.GVK().Kind, obj), nil
			}
		}
	}
	return "", nil
}

func hasGangLabels(p *corev1.Pod) bool {
	_, w := p.Labels[berthv1.WorkloadLabel]
	_, pl := p.Labels[berthv1.PlacementLabel]
	return w || pl
}

func gangLabelsForbidden(p *corev1.Pod, why string) *field.Error {
	key := berthv1.WorkloadLabel
	if _, ok := p.Labels[key]; !ok {
		key = berthv1.PlacementLabel
	}
	return field.Forbidden(labelsPath.Key(key), fmt.Sprintf(
		"berth sets %s and %s on the pods of admitted gangs only, to the Workload's UID; this is %s: remove the label",
		berthv1.WorkloadLabel, berthv1.PlacementLabel, why))
}

// validateGangLabels checks that the pod's berth labels, when set, hold the
// UID of the admitted Workload of the pod's own gang, and that a released
// pod has them. Without refusals it returns that Workload.
func (v Validator) validateGangLabels(ctx context.Context, p *corev1.Pod) (*berthv1.Workload, field.ErrorList, error) {
	name, why, err := v.gangWorkload(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if name == "" {
		return nil, field.ErrorList{gangLabelsForbidden(p, why)}, nil
	}
	wl, err := v.Workloads.Get(ctx, p.Namespace, name, jobs.Admitted)
	if err != nil {
		return nil, nil, err
	}
	if !jobs.Admitted(wl) {
		return nil, field.ErrorList{gangLabelsForbidden(p, fmt.Sprintf("a pod whose workload %s is not admitted", name))}, nil
	}
	uid := string(wl.UID)
	if p.Labels[berthv1.WorkloadLabel] != uid || (p.Labels[berthv1.PlacementLabel] != "" && p.Labels[berthv1.PlacementLabel] != uid) {
		return nil, field.ErrorList{gangLabelsForbidden(p, fmt.Sprintf("not the UID of workload %s, the pod's own", name))}, nil
	}
	// berth's capacity model leaves a placed pod's usage to the engine,
	// which reserves it only for an admission placed in a topology domain.
	if _, placed := p.Labels[berthv1.PlacementLabel]; placed && (wl.Status.Admission == nil || wl.Status.Admission.Topology == nil) {
		return nil, field.ErrorList{field.Forbidden(labelsPath.Key(berthv1.PlacementLabel), fmt.Sprintf(
			"berth sets it only on the pods of a gang it placed in a topology domain, and workload %s was admitted without one: remove the label", name))}, nil
	}
	return wl, nil, nil
}

// gangWorkload names the Workload of the gang a pod belongs to, or says
// why it belongs to none.
func (v Validator) gangWorkload(ctx context.Context, p *corev1.Pod) (string, string, error) {
	ref := metav1.GetControllerOf(p)
	switch {
	case ref == nil:
		key := p.Labels[berthv1.PodGroupLabel]
		if key == "" {
			key = p.Name
		}
		return jobs.KeyWorkloadName("Pod", p.Namespace, key), "", nil
	case ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String():
		job, err := v.job(ctx, p.Namespace, ref)
		if err != nil || job == nil {
			return "", fmt.Sprintf("a pod of Job %q, which berth does not queue", ref.Name), err
		}
		parent, kind, err := jobs.ParentOf(ctx, v.Workloads.Cache, job, v.Parents)
		if err != nil {
			return "", "", err
		}
		if parent != nil {
			return jobs.WorkloadName(kind.GVK().Kind, parent), "", nil
		}
		return jobs.WorkloadName("Job", job), "", nil
	case isReplicaPod(p, ref):
		return v.replicaWorkload(ctx, p)
	}
	if name, err := v.controllerWorkload(ctx, p.Namespace, ref); err != nil || name != "" {
		return name, "", err
	}
	if kind, key, ok := ServingKey(p); ok {
		s, err := ServingController(ctx, p, v.Workloads.Cache, v.Workloads.API)
		if err != nil || s.Owner == nil {
			return "", "a pod berth does not queue: " + s.Why, err
		}
		return jobs.KeyWorkloadName(kind, p.Namespace, key), "", nil
	}
	return "", fmt.Sprintf("a pod of %s %q, which berth does not queue", ref.Kind, ref.Name), nil
}

// validateBound refuses releasing a pod whose pod set already runs every
// pod its admission counts: a pod that copies the labels of an admitted
// gang's members does not run beside them on their quota. wl is the pod's
// admitted Workload (validateGangLabels). Pods are counted by r: the
// cache, which can only lag behind releases (never count more than run),
// so berth's own releases, bounded the same way, pass.
//
// It bounds a pod created ungated with berth's labels too — the
// pods a Job's, a JobSet's or an operator's controller creates once berth
// resumed the job — so that growing a running child Job's parallelism, or
// orphaning a running pod so that its Job replaces it, runs no pod beyond
// the admission. Such pods carry berth's labels but not the queue label,
// and berth caches only queued pods (setup.CacheOptions): r is then the
// API server, which also shows at once the pod whose end made a Job
// create the next one.
//
// A pod being deleted is counted until it ends: it runs through its grace
// period, which its owner chooses (a year, with a process that ignores
// SIGTERM), so a replacement created beside it would run beyond the
// admission, and a tenant deleting pods over and over would run as many
// as it liked. A controller that replaces a terminating pod at once (a
// Job's default podReplacementPolicy, TerminatingOrFailed) has its create
// refused until the pod ended, and retries.
func validateBound(ctx context.Context, places *Places, r client.Reader, p *corev1.Pod, wl *berthv1.Workload, release bool) (field.ErrorList, error) {
	set := p.Labels[berthv1.PodSetLabel]
	var admitted int32 = -1
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name == set {
			admitted = psa.Count
		}
	}
	if set == "" {
		return field.ErrorList{field.Forbidden(labelsPath.Key(berthv1.PodSetLabel), fmt.Sprintf(
			"berth labels the pods of an admitted gang with %s beside %s, and counts them by it; this pod has none: it cannot run on workload %s",
			berthv1.PodSetLabel, berthv1.WorkloadLabel, wl.Name))}, nil
	}
	if admitted < 0 {
		return field.ErrorList{field.Forbidden(labelsPath.Key(berthv1.PodSetLabel), fmt.Sprintf(
			"workload %s admitted no pod set %q", wl.Name, set))}, nil
	}
	k := placeKey{namespace: p.Namespace, workload: string(wl.UID), podSet: set}
	held := places.hold(k)
	defer places.release(k, held)
	running, counted, listed, err := countRunning(ctx, r, p)
	if err != nil {
		return nil, fmt.Errorf("listing pods of workload %s: %w", wl.Name, err)
	}
	if running+places.pending(held, counted, listed, p.UID) >= admitted {
		return field.ErrorList{field.Forbidden(labelsPath.Key(berthv1.WorkloadLabel), fmt.Sprintf(
			"pod set %s of workload %s already runs the %d pods it was admitted for", set, wl.Name, admitted))}, nil
	}
	places.let(held, p.UID, release)
	return nil, nil
}

// countRunning counts the pods of p's workload and pod set (by berth's
// labels) that run or may run, other than p: released and not ended,
// being deleted or not. counted are the UIDs of those it counted, listed
// those of every pod it read.
func countRunning(ctx context.Context, r client.Reader, p *corev1.Pod) (int32, map[types.UID]bool, map[types.UID]bool, error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(p.Namespace),
		client.MatchingLabels{berthv1.WorkloadLabel: p.Labels[berthv1.WorkloadLabel], berthv1.PodSetLabel: p.Labels[berthv1.PodSetLabel]}); err != nil {
		return 0, nil, nil, err
	}
	var running int32
	counted, listed := map[types.UID]bool{}, map[types.UID]bool{}
	for i := range list.Items {
		q := &list.Items[i]
		listed[q.UID] = true
		if q.UID != p.UID && !IsGated(q) && !isTerminal(q) {
			running++
			counted[q.UID] = true
		}
	}
	return running, counted, listed, nil
}
