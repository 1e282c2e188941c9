package headroom

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// podShape is count pods of one template in a replica.
type podShape struct {
	// role names the shape in the objects made for it ("pod", "leader",
	// "worker").
	role     string
	template corev1.PodTemplateSpec
	count    int32
}

// target is what headroom needs of a serving workload: the queue it is
// admitted from, its replicas, the pods one replica is, and the topology
// level a replica must run whole in ("" for none).
type target struct {
	uid        types.UID
	queue      string
	replicas   int32
	level      string
	shapes     []podShape
	generation int64
}

// errNotFound says the target does not exist; its message is the
// condition's.
type errNotFound struct{ msg string }

func (e errNotFound) Error() string { return e.msg }

// readTarget reads the policy's target workload.
func readTarget(ctx context.Context, c client.Reader, hp *berthv1.HeadroomPolicy) (target, error) {
	key := types.NamespacedName{Namespace: hp.Namespace, Name: hp.Spec.TargetRef.Name}
	var obj client.Object
	switch hp.Spec.TargetRef.Kind {
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "LeaderWorkerSet":
		obj = &lwsv1.LeaderWorkerSet{}
	default:
		return target{}, fmt.Errorf("targetRef.kind %q is not a serving kind: use Deployment, StatefulSet or LeaderWorkerSet", hp.Spec.TargetRef.Kind)
	}
	if err := c.Get(ctx, key, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return target{}, errNotFound{fmt.Sprintf("%s %s does not exist", hp.Spec.TargetRef.Kind, key)}
		}
		return target{}, fmt.Errorf("reading %s %s: %w", hp.Spec.TargetRef.Kind, key, err)
	}
	t := target{uid: obj.GetUID(), queue: obj.GetLabels()[berthv1.QueueNameLabel], generation: obj.GetGeneration()}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		t.replicas = ptr.Deref(o.Spec.Replicas, 1)
		t.shapes = []podShape{{role: "pod", template: o.Spec.Template, count: 1}}
		t.level = o.Spec.Template.Annotations[berthv1.TopologyRequiredAnnotation]
	case *appsv1.StatefulSet:
		t.replicas = ptr.Deref(o.Spec.Replicas, 1)
		t.shapes = []podShape{{role: "pod", template: o.Spec.Template, count: 1}}
		t.level = o.Spec.Template.Annotations[berthv1.TopologyRequiredAnnotation]
	case *lwsv1.LeaderWorkerSet:
		t.replicas = ptr.Deref(o.Spec.Replicas, 1)
		t.shapes = lwsShapes(o)
		t.level = o.Annotations[berthv1.TopologyRequiredAnnotation]
	}
	if hp.Spec.TopologyLevel != "" {
		t.level = hp.Spec.TopologyLevel
	}
	return t, nil
}

// lwsShapes are the pods of one LeaderWorkerSet replica: its leader and
// size-1 workers, or size workers when the leader has no template of its
// own.
func lwsShapes(o *lwsv1.LeaderWorkerSet) []podShape {
	size := ptr.Deref(o.Spec.LeaderWorkerTemplate.Size, 1)
	worker := o.Spec.LeaderWorkerTemplate.WorkerTemplate
	if lt := o.Spec.LeaderWorkerTemplate.LeaderTemplate; lt != nil {
		shapes := []podShape{{role: "leader", template: *lt, count: 1}}
		if size > 1 {
			shapes = append(shapes, podShape{role: "worker", template: worker, count: size - 1})
		}
		return shapes
	}
	return []podShape{{role: "worker", template: worker, count: size}}
}

// replicaRequests is what one replica of t requests in all.
func (t target) replicaRequests() corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, s := range t.shapes {
		for name, q := range jobs.PodRequests(&s.template.Spec) {
			sum := total[name]
			for range s.count {
				sum.Add(q)
			}
			total[name] = sum
		}
	}
	return total
}
