package jobs

import (
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// MaxTemplateBytes bounds the JSON size of one pod set's template in a
// Workload. Reduced to what decides placement, real templates are a few
// KiB; the bound keeps a Workload far below the API server's object limit
// even with many pod sets.
const MaxTemplateBytes = 64 << 10

// ownScheduling is each pod set's node selector and tolerations as the job
// declares them: recorded before berth first changed them, or the job's
// current ones.
//
// Only kinds berth holds by suspending them keep such a record
// (saveOriginalScheduling): berth writes their template, and restores it
// from the record when it stops them. The pods of a Writer are released
// with their own scheduling plus the admission's and never restored, so
// berth writes no record for them; one found there was written by someone
// else and would show the engine a scheduling the pods do not have (no
// toleration of another queue's headroom, no node selector). It is
// ignored: the engine sees the pods' own.
func ownScheduling(job GenericJob) map[string]PodSetScheduling {
	base := job.Scheduling()
	raw, ok := job.Object().GetAnnotations()[berthv1.OriginalSchedulingAnnotation]
	if _, pods := job.(Writer); ok && !pods {
		var orig []PodSetScheduling
		if err := json.Unmarshal([]byte(raw), &orig); err == nil {
			base = orig
		}
	}
	out := make(map[string]PodSetScheduling, len(base))
	for _, s := range base {
		out[s.Name] = s
	}
	return out
}

// schedulingTemplate reduces a pod set's template to what decides where its
// pods may run (see berthv1.PodSetTemplate), with the job's own node
// selector and tolerations. An *InvalidError says that it is too large.
func schedulingTemplate(t PodSetTemplate, own PodSetScheduling) (*berthv1.PodSetTemplate, error) {
	in := t.Spec
	out := &berthv1.PodSetTemplate{
		Labels: withoutManaged(t.Labels),
		Spec: corev1.PodSpec{
			NodeSelector:              maps.Clone(own.NodeSelector),
			Tolerations:               append([]corev1.Toleration(nil), own.Tolerations...),
			Affinity:                  in.Affinity.DeepCopy(),
			TopologySpreadConstraints: append([]corev1.TopologySpreadConstraint(nil), in.TopologySpreadConstraints...),
			ResourceClaims:            append([]corev1.PodResourceClaim(nil), in.ResourceClaims...),
			PriorityClassName:         in.PriorityClassName,
			RuntimeClassName:          in.RuntimeClassName,
			Overhead:                  in.Overhead.DeepCopy(),
			Resources:                 in.Resources.DeepCopy(),
			HostNetwork:               in.HostNetwork,
			SchedulerName:             in.SchedulerName,
			InitContainers:            schedulingContainers(in.InitContainers),
			Containers:                schedulingContainers(in.Containers),
		},
	}
	if len(out.Spec.Tolerations) == 0 {
		out.Spec.Tolerations = nil
	}
	for _, v := range in.Volumes {
		// Only volumes bound to storage constrain the node (a zonal
		// volume, storage capacity); the others go wherever the pod does.
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, *v.DeepCopy())
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encoding the template of pod set %s: %w", t.Name, err)
	}
	if len(raw) > MaxTemplateBytes {
		return nil, Invalid("the pod template of pod set %s takes %d KiB even without commands, environment and probes; berth keeps at most %d KiB: move large affinity terms or inline volume sources out of the template",
			t.Name, len(raw)>>10, MaxTemplateBytes>>10)
	}
	return out, nil
}

// schedulingContainers keeps what the scheduler reads of each container:
// its image (image locality), resources and host ports, and the restart
// policy that makes an init container a sidecar.
func schedulingContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: *c.Resources.DeepCopy(), RestartPolicy: c.RestartPolicy}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out[i].Ports = append(out[i].Ports, p)
			}
		}
	}
	return out
}

// withoutManaged is labels without berth's own.
func withoutManaged(labels map[string]string) map[string]string {
	out := SetLabels(maps.Clone(labels), nil)
	if len(out) == 0 {
		return nil
	}
	return out
}
