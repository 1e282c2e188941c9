package burst

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// gangName is the name of gang i: its pod group, or its Deployment.
func gangName(i int) string { return fmt.Sprintf("r%05d", i) }

// GangDeployment is gang i in the replica shape: a Deployment of one-GPU
// replicas, created with none (its scale-up is the gang's arrival), queued
// in LocalQueue "team" through berth by its own label, which berth copies
// into its pod template.
func GangDeployment(ns string, i int, throughBerth bool) *appsv1.Deployment {
	gang := gangName(i)
	gpu := corev1.ResourceList{builders.GPU: resource.MustParse("1")}
	labels := map[string]string{GangLabel: gang}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gang, Labels: map[string]string{}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{GangLabel: gang}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "registry.invalid/inference:latest",
					Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
			},
		},
	}
	if throughBerth {
		d.Labels[berthv1.QueueNameLabel] = "team"
	}
	return d
}

// createDeployments creates every gang's Deployment with no replicas and
// waits until the Deployment controller made each one's ReplicaSet, so
// that a run's arrivals are scale-ups only.
func createDeployments(ctx context.Context, cs kubernetes.Interface, ns string, gangs int, throughBerth bool) error {
	err := fanOut(func(next chan<- int) {
		for i := range gangs {
			next <- i
		}
	}, func(i int) error {
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, GangDeployment(ns, i, throughBerth), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s/%s: %w", ns, gangName(i), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, fmt.Errorf("listing the ReplicaSets in %s: %w", ns, err)
		}
		return len(rs.Items) >= gangs, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the ReplicaSets of %d Deployments in %s: %w", gangs, ns, err)
	}
	return nil
}

// scaleUp is gang i's arrival in the replica shape: its Deployment scaled
// to the gang's size through the scale subresource.
func scaleUp(ctx context.Context, cs kubernetes.Interface, ns string, i, size int) error {
	patch := []byte(`{"spec":{"replicas":` + strconv.Itoa(size) + `}}`)
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, gangName(i), types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil {
		return fmt.Errorf("scaling Deployment %s/%s to %d: %w", ns, gangName(i), size, err)
	}
	return nil
}

// podsOnRecords counts the pods of ns that carry berth's admission record:
// replicas admitted without a Workload.
func podsOnRecords(ctx context.Context, c client.Client, ns string) (int, error) {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("listing the pods in %s: %w", ns, err)
	}
	n := 0
	for _, p := range pods.Items {
		if _, ok := p.Annotations[berthv1.AdmissionRecordAnnotation]; ok {
			n++
		}
	}
	return n, nil
}
