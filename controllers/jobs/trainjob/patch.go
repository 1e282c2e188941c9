package trainjob

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// berth's entry in a TrainJob's spec.runtimePatches (manager
// berth.dev/manager). Trainer applies the entries in list order over the
// runtime's JobSet template and lets their owners change them only while
// the TrainJob is suspended (before or after the change): berth writes its
// placement in the same update that resumes the TrainJob, and empties it
// while the TrainJob is held.
//
// The entry always labels the JobSet with the TrainJob's queue: the
// trainer does not copy a TrainJob's labels onto its JobSet, and without
// the label berth's JobSet webhooks would not see the JobSet (they select
// queued objects), so nothing would keep it from being resumed, or grown,
// outside the TrainJob's admission — and the pods of a JobSet berth does
// not know carry berth's gang labels in vain: the pod webhook refuses them.

// patchIndex is the index of berth's entry in tj's runtime patches, -1
// when there is none.
func patchIndex(tj *trainer.TrainJob) int {
	return slices.IndexFunc(tj.Spec.RuntimePatches, func(p trainer.RuntimePatch) bool { return p.Manager == Manager })
}

// ownPatch returns berth's entry of tj's runtime patches, moved (or
// added) last, so that the admission's placement is applied over every
// other entry, and naming tj's queue in the JobSet's labels.
func ownPatch(tj *trainer.TrainJob) *trainer.RuntimePatch {
	p := trainer.RuntimePatch{Manager: Manager}
	if i := patchIndex(tj); i >= 0 {
		p = tj.Spec.RuntimePatches[i]
		tj.Spec.RuntimePatches = slices.Delete(tj.Spec.RuntimePatches, i, i+1)
	}
	tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, p)
	own := &tj.Spec.RuntimePatches[len(tj.Spec.RuntimePatches)-1]
	if own.TrainingRuntimeSpec == nil {
		own.TrainingRuntimeSpec = &trainer.TrainingRuntimeSpecPatch{}
	}
	t := own.TrainingRuntimeSpec
	if t.Template == nil {
		t.Template = &trainer.JobSetTemplatePatch{}
	}
	if t.Template.Metadata == nil {
		t.Template.Metadata = &metav1.ObjectMeta{}
	}
	if t.Template.Metadata.Labels == nil {
		t.Template.Metadata.Labels = map[string]string{}
	}
	t.Template.Metadata.Labels[berthv1.QueueNameLabel] = tj.Labels[berthv1.QueueNameLabel]
	if t.Template.Spec == nil {
		t.Template.Spec = &trainer.JobSetSpecPatch{}
	}
	return own
}

// patchQueue is the queue berth's entry names in the JobSet's labels, ""
// when it names none.
func patchQueue(tj *trainer.TrainJob) string {
	i := patchIndex(tj)
	if i < 0 {
		return ""
	}
	t := tj.Spec.RuntimePatches[i].TrainingRuntimeSpec
	if t == nil || t.Template == nil || t.Template.Metadata == nil {
		return ""
	}
	return t.Template.Metadata.Labels[berthv1.QueueNameLabel]
}

// SetScheduling writes the named pod sets' node selector, tolerations and
// berth's labels and annotations into berth's runtime patch, one entry per
// replicated job. A pod set's scheduling without berth's workload label is
// not an admission's placement but the TrainJob's own (berth restoring it
// after an eviction), which the runtime and the other entries already
// hold: its entry is removed.
func (j *TrainJob) SetScheduling(s []jobs.PodSetScheduling) {
	spec := ownPatch(j.TrainJob).TrainingRuntimeSpec.Template.Spec
	for _, ps := range s {
		spec.ReplicatedJobs = slices.DeleteFunc(spec.ReplicatedJobs, func(p trainer.ReplicatedJobPatch) bool { return p.Name == ps.Name })
		if ps.Labels[berthv1.WorkloadLabel] == "" {
			continue
		}
		spec.ReplicatedJobs = append(spec.ReplicatedJobs, trainer.ReplicatedJobPatch{
			Name: ps.Name,
			Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: ps.Labels, Annotations: ps.Annotations},
				Spec:     &trainer.PodSpecPatch{NodeSelector: ps.NodeSelector, Tolerations: ps.Tolerations},
			}}},
		})
	}
	if len(spec.ReplicatedJobs) == 0 {
		spec.ReplicatedJobs = nil
	}
	if j.runtime != nil {
		// What the pods get now; the runtime applied before, so this
		// cannot fail on what it built then.
		j.placed, _ = jobSetSpec(j.TrainJob, j.runtime, "")
	}
}
