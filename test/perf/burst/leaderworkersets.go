package burst

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// GangLeaderWorkerSet is gang i in the LeaderWorkerSet shape: a set whose
// replica is a leader and GangSize(i)-1 workers of one GPU each, created
// with no replicas (its scale-up to one is the gang's arrival), queued in
// LocalQueue "team" through berth by its own label.
func GangLeaderWorkerSet(ns string, i, maxSize int, throughBerth bool) *lwsv1.LeaderWorkerSet {
	gang := gangName(i)
	gpu := corev1.ResourceList{builders.GPU: resource.MustParse("1")}
	size := int32(GangSize(i, maxSize))
	set := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gang, Labels: map[string]string{}},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:        new(int32),
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: &size, WorkerTemplate: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{GangLabel: gang}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "registry.invalid/inference:latest",
					Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
			}},
		},
	}
	if throughBerth {
		set.Labels[berthv1.QueueNameLabel] = "team"
	}
	return set
}

// createScalables creates, before a run's clock starts, what the run's
// gangs scale up: every Deployment or LeaderWorkerSet, with no replicas.
// Pod groups need nothing.
func (p *phaser) createScalables(ctx context.Context, cs kubernetes.Interface, ns string, throughBerth bool) error {
	switch p.o.Shape {
	case ShapeDeployments:
		return createDeployments(ctx, cs, ns, p.o.Gangs, throughBerth)
	case ShapeLeaderWorkerSets:
		return p.createSets(ctx, ns, throughBerth)
	}
	return nil
}

// createSets creates every gang's LeaderWorkerSet with no replicas and
// waits until the operator made each one's leader StatefulSet.
func (p *phaser) createSets(ctx context.Context, ns string, throughBerth bool) error {
	err := fanOut(func(next chan<- int) {
		for i := range p.o.Gangs {
			next <- i
		}
	}, func(i int) error {
		if err := p.load.Create(ctx, GangLeaderWorkerSet(ns, i, p.o.MaxGangSize, throughBerth)); err != nil {
			return fmt.Errorf("creating LeaderWorkerSet %s/%s: %w", ns, gangName(i), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		sets := &metav1.PartialObjectMetadataList{}
		sets.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSetList"))
		if err := p.load.List(ctx, sets, client.InNamespace(ns)); err != nil {
			return false, fmt.Errorf("listing the StatefulSets in %s: %w", ns, err)
		}
		return len(sets.Items) >= p.o.Gangs, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the leader StatefulSets of %d LeaderWorkerSets in %s: %w", p.o.Gangs, ns, err)
	}
	return nil
}

// setsResource is the LeaderWorkerSets' API resource.
var setsResource = lwsv1.GroupVersion.WithResource("leaderworkersets")

// scaleUpSet is gang i's arrival in the LeaderWorkerSet shape: its set
// scaled to one replica through the scale subresource, as a
// HorizontalPodAutoscaler scales it.
func (p *phaser) scaleUpSet(ctx context.Context, ns string, i int) error {
	_, err := p.dynamic.Resource(setsResource).Namespace(ns).Patch(ctx, gangName(i), types.MergePatchType,
		[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}, "scale")
	if err != nil {
		return fmt.Errorf("scaling LeaderWorkerSet %s/%s to one replica: %w", ns, gangName(i), err)
	}
	return nil
}
