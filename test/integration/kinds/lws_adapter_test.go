package kinds_test

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/lws"
	"github.com/berth-dev/berth/test/builders"
)

// lwsAdapter drives LeaderWorkerSets of one replica of size 2 (a leader and
// a worker), 4 GPUs per pod.
type lwsAdapter struct{}

func (lwsAdapter) Kind() string { return "LeaderWorkerSet" }

func (lwsAdapter) PodSets() []string { return []string{lws.LeaderPodSet, lws.WorkersPodSet} }

func (lwsAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	obj := newLWS(namespace, name, queue)
	return obj, c.Create(ctx, obj)
}

func (lwsAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	obj := newLWS(namespace, name, queue)
	obj.Labels[berthv1.PriorityClassLabel] = "no-such-class"
	return obj, `PriorityClass "no-such-class" does not exist`, c.Create(ctx, obj)
}

// State plays the operator (creating missing pods), then reports the
// LeaderWorkerSet started when every pod of every replica is released.
func (lwsAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	set := &lwsv1.LeaderWorkerSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), set); err != nil {
		return false, nil, err
	}
	pods, err := ensurePods(ctx, c, set)
	if err != nil {
		return false, nil, err
	}
	sel := map[string]map[string]string{}
	started := len(pods) > 0
	for _, p := range pods {
		started = started && !gated(&p)
		set := lws.WorkersPodSet
		if p.Labels[lwsv1.WorkerIndexLabelKey] == "0" {
			set = lws.LeaderPodSet
		}
		sel[set] = p.Spec.NodeSelector
	}
	return started, sel, nil
}

// Finish scales the LeaderWorkerSet to zero: a serving set never finishes,
// it is scaled down. Its StatefulSets then delete the pods, which this
// suite (no controller-manager) does itself: berth releases a replica's
// quota only once its pods are gone.
func (lwsAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	if err := scale(ctx, c, obj, 0); err != nil {
		return err
	}
	return deletePods(ctx, c, obj)
}

func (lwsAdapter) Finishes() bool { return false }

// Delete deletes the LeaderWorkerSet, and its pods as the garbage
// collector would.
func (lwsAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Delete(ctx, obj); err != nil {
		return err
	}
	return deletePods(ctx, c, obj)
}

// deletePods deletes the LeaderWorkerSet's pods.
func deletePods(ctx context.Context, c client.Client, obj client.Object) error {
	return c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{lwsv1.SetNameLabelKey: obj.GetName()})
}

func (lwsAdapter) Requeues() bool { return true }

func scale(ctx context.Context, c client.Client, obj client.Object, replicas int32) error {
	set := &lwsv1.LeaderWorkerSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), set); err != nil {
		return err
	}
	set.Spec.Replicas = ptr.To(replicas)
	return c.Update(ctx, set)
}

func newLWS(namespace, name, queue string) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: queue}},
		Spec: lwsv1.LeaderWorkerSetSpec{
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			Replicas:        ptr.To[int32](1),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				Size: ptr.To[int32](2),
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/serve:latest",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")},
							Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("4")},
						}}},
				}},
			},
		},
	}
}

// ensurePods creates the pods of every replica that are missing, labelled
// and owned as the operator's StatefulSets make them, and returns all pods.
func ensurePods(ctx context.Context, c client.Client, set *lwsv1.LeaderWorkerSet) ([]corev1.Pod, error) {
	size := ptr.Deref(set.Spec.LeaderWorkerTemplate.Size, 1)
	for i := range ptr.Deref(set.Spec.Replicas, 1) {
		for w := range size {
			name := fmt.Sprintf("%s-%d", set.Name, i)
			if w > 0 {
				name = fmt.Sprintf("%s-%d-%d", set.Name, i, w)
			}
			tmpl := set.Spec.LeaderWorkerTemplate.WorkerTemplate.DeepCopy()
			labels := map[string]string{
				lwsv1.SetNameLabelKey: set.Name, lwsv1.GroupIndexLabelKey: strconv.Itoa(int(i)), lwsv1.WorkerIndexLabelKey: strconv.Itoa(int(w)),
			}
			for k, v := range tmpl.Labels {
				labels[k] = v
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: set.Namespace, Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: lwsv1.GroupVersion.String(), Kind: "LeaderWorkerSet", Name: set.Name, UID: set.UID, Controller: ptr.To(true),
				}}},
				Spec: tmpl.Spec,
			}
			if err := c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating pod %s: %w", name, err)
			}
		}
	}
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(set.Namespace), client.MatchingLabels{lwsv1.SetNameLabelKey: set.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}
