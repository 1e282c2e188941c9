package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
)

// Calibration is the API server's write throughput on this machine, with
// nobody watching: Workloads created and given the two status patches a
// run needs (admission, finish) by concurrent writers with a plain client.
type Calibration struct {
	// Workloads written.
	Workloads int `json:"workloads"`
	// Writers is how many wrote concurrently.
	Writers int `json:"writers"`
	// Writes is Workloads × 3.
	Writes int `json:"writes"`
	// Seconds it took.
	Seconds float64 `json:"seconds"`
	// WritesPerSecond is Writes / Seconds.
	WritesPerSecond float64 `json:"writesPerSecond"`
}

// calibrate measures the API server's write throughput on a fresh plane in
// dir, which it stops before returning, so the measured run starts on an
// empty etcd.
func calibrate(ctx context.Context, binDir, dir string, workloads, writers int) (cal Calibration, err error) {
	cl, err := startCluster(ctx, binDir, dir, false)
	if err != nil {
		return cal, fmt.Errorf("calibration: %w", err)
	}
	defer func() { err = errors.Join(err, cl.stop()) }()
	const ns = "calibration"
	if err := cl.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return cal, fmt.Errorf("calibration: creating namespace: %w", err)
	}
	next := make(chan int)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for i := range next {
				if err := writeOne(ctx, cl, ns, i); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for i := range workloads {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if err := failed.Load(); err != nil {
		return cal, fmt.Errorf("calibration: %w", *err)
	}
	return Calibration{Workloads: workloads, Writers: writers, Writes: 3 * workloads, Seconds: elapsed,
		WritesPerSecond: float64(3*workloads) / elapsed}, nil
}

// writeOne creates a Workload shaped like the run's and writes an admission
// and a finish to its status, as berth and the runner do.
func writeOne(ctx context.Context, cl *cluster, ns string, i int) error {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%06d", i), Labels: map[string]string{ClassLabel: "calibration"}},
		Spec: berthv1.WorkloadSpec{QueueName: LocalQueueName, Priority: 50, PodSets: []berthv1.PodSet{{
			Name: "main", Count: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}},
	}
	if err := cl.client.Create(ctx, wl); err != nil {
		return fmt.Errorf("creating workload: %w", err)
	}
	adm := &berthv1.Admission{ClusterQueue: ns, PodSetAssignments: []berthv1.PodSetAssignment{{
		Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "default"},
	}}}
	w := persist.Writer{Client: cl.client, Reader: cl.client, Clock: clock.RealClock{}}
	if _, err := w.Write(ctx, wl, lifecycle.Admit{Admission: adm, Generation: wl.Generation, Message: "admitted by ClusterQueue calibration: cpu in default"}); err != nil {
		return err
	}
	_, err := w.Write(ctx, wl, lifecycle.Finish{Succeeded: true, Message: "ran for 1s"})
	return err
}
