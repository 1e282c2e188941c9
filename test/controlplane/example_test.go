package controlplane_test

import (
	"context"
	"log"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/controlplane"
)

// A Full plane with berth's CRDs, one eight-GPU H200 node, and a Job whose
// pod runs for 30 seconds on it. In a Ginkgo suite, Start belongs in
// BeforeSuite (or an Ordered container's BeforeAll) with Stop in
// DeferCleanup, so one plane serves many specs.
func Example() {
	if err := runExample(context.Background()); err != nil {
		log.Fatal(err) // a start-up error names the component and quotes its log
	}
}

func runExample(ctx context.Context) error {
	plane, err := controlplane.Start(ctx, controlplane.Options{
		Full:              true,
		CRDDirectoryPaths: []string{"../../config/crd/bases"},
	})
	if err != nil {
		return err
	}
	defer func() { _ = plane.Stop() }()

	c, err := client.New(plane.Config, client.Options{})
	if err != nil {
		return err
	}
	node := controlplane.GPUNode("h200-0", 8, map[string]string{"topology.kubernetes.io/zone": "zone-a"})
	if err := c.Create(ctx, node); err != nil {
		return err
	}
	if err := controlplane.WaitForNodeReady(ctx, c, node.Name); err != nil {
		return err
	}

	gpus := corev1.ResourceList{controlplane.GPUResource: resource.MustParse("8")}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: controlplane.RunFor(30 * time.Second)},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "train", Image: "train",
					Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus},
				}},
			},
		}},
	}
	// kubectl --kubeconfig plane.Kubeconfig get pods -w shows the pod
	// Running for 30s, then Completed; the Job then reports Complete.
	return c.Create(ctx, job)
}
