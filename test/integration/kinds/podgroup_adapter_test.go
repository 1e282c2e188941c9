package kinds_test

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/podgroup"
	"github.com/berth-dev/berth/test/builders"
)

// podGroupAdapter drives groups of two pods with 4 GPUs each; a job is named by
// its first pod.
type podGroupAdapter struct{}

func (podGroupAdapter) Kind() string { return "pod group" }

func (podGroupAdapter) PodSets() []string { return []string{podgroup.PodSetName} }

func (podGroupAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	ps := groupPods(namespace, name, queue, "2", "2")
	for _, p := range ps {
		if err := c.Create(ctx, p); err != nil {
			return nil, err
		}
	}
	return ps[0], nil
}

func (podGroupAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	ps := groupPods(namespace, name, queue, "2", "3")
	for _, p := range ps {
		if err := c.Create(ctx, p); err != nil {
			return nil, "", err
		}
	}
	return ps[0], "disagree on " + berthv1.PodGroupTotalCountAnnotation, nil
}

// State reports a group started when none of its pods is gated.
func (podGroupAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	members, err := membersOf(ctx, c, obj)
	if err != nil || len(members) == 0 {
		return false, nil, err
	}
	for _, p := range members {
		if gated(&p) {
			return false, nil, nil
		}
	}
	return true, map[string]map[string]string{podgroup.PodSetName: members[0].Spec.NodeSelector}, nil
}

func (podGroupAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	members, err := membersOf(ctx, c, obj)
	if err != nil {
		return err
	}
	for i := range members {
		members[i].Status.Phase = corev1.PodSucceeded
		if err := c.Status().Update(ctx, &members[i]); err != nil {
			return err
		}
	}
	return nil
}

func (podGroupAdapter) Finishes() bool { return true }

func (podGroupAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{berthv1.PodGroupLabel: obj.GetLabels()[berthv1.PodGroupLabel]})
}

// Requeues is false: plain pods are deleted on eviction and nothing
// creates them again.
func (podGroupAdapter) Requeues() bool { return false }

// groupPods builds one pod per count, each of group name with that
// total-count annotation and 4 GPUs.
func groupPods(namespace, name, queue string, counts ...string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(counts))
	for i, count := range counts {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   namespace,
				Name:        name + "-" + strconv.Itoa(i),
				Labels:      map[string]string{berthv1.QueueNameLabel: queue, berthv1.PodGroupLabel: name},
				Annotations: map[string]string{berthv1.PodGroupTotalCountAnnotation: count},
			},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/serve:latest",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")},
						Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("4")},
					}}},
			},
		})
	}
	return out
}

func membersOf(ctx context.Context, c client.Client, obj client.Object) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{berthv1.PodGroupLabel: obj.GetLabels()[berthv1.PodGroupLabel]}); err != nil {
		return nil, fmt.Errorf("listing group pods: %w", err)
	}
	return list.Items, nil
}
