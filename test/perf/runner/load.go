package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// ClassLabel names a workload's class on the objects the runner creates.
const ClassLabel = "perf.berth.dev/class"

type actionKind int

const (
	actionFinish actionKind = iota
	actionRequeue
)

// action is a write the runner owes a workload: its finish once its
// runtime has passed, or its requeue after berth evicted it.
type action struct {
	kind  actionKind
	wl    int
	run   int // finish: the admission it ends
	tries int
}

// submit creates every workload at its arrival time after t0, with up to
// workers creates in flight, and returns once all were attempted.
func (t *tracker) submit(ctx context.Context, c client.Client, t0 time.Time, workers int) {
	next := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				t.create(ctx, c, i, t0.Add(t.wls[i].Arrival))
			}
		})
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i, w := range t.wls {
		if d := time.Until(t0.Add(w.Arrival)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}

// create creates workload i (as a Workload or a Job), retrying what the
// API server may refuse under load.
func (t *tracker) create(ctx context.Context, c client.Client, i int, due time.Time) {
	obj := t.object(i)
	now := time.Now()
	t.mu.Lock()
	t.recs[i].created, t.recs[i].createLag = now, now.Sub(due)
	t.mu.Unlock()
	var err error
	for try := 0; try < 10; try++ {
		if err = c.Create(ctx, obj); err == nil || !retriable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
	}
	if err != nil {
		t.failed(i, fmt.Errorf("creating %s: %w", client.ObjectKeyFromObject(obj), err))
	}
}

// object is the API object of workload i: a Workload, as a job adapter
// would create it, or a suspended batch/v1 Job, as berth's webhook would
// leave it.
func (t *tracker) object(i int) client.Object {
	w := t.wls[i]
	c := &t.s.Classes[w.Class]
	meta := metav1.ObjectMeta{Namespace: t.cqs[w.ClusterQueue].Name, Name: w.Name, Labels: map[string]string{ClassLabel: c.Name}}
	var topology *berthv1.TopologyRequest
	if c.Topology != nil {
		key := berthv1.TopologyRequiredAnnotation
		topology = &berthv1.TopologyRequest{Mode: berthv1.TopologyRequired, Level: c.Topology.Level}
		if c.Topology.Mode == scenario.TopologyPreferred {
			key = berthv1.TopologyPreferredAnnotation
			topology.Mode = berthv1.TopologyPreferred
		}
		meta.Annotations = map[string]string{key: c.Topology.Level}
	}
	if t.mode == ModeJobs {
		meta.Labels[berthv1.QueueNameLabel] = LocalQueueName
		limits := corev1.ResourceList{}
		for r, q := range c.Request {
			if !isNative(r) { // extended resources need limit == request
				limits[r] = q
			}
		}
		return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{
			Suspend:      ptr.To(true),
			Parallelism:  ptr.To(c.PodsPerGang),
			Completions:  ptr.To(c.PodsPerGang),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:     corev1.RestartPolicyNever,
				PriorityClassName: PriorityClassName(c.Priority),
				Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/perf:latest",
					Resources: corev1.ResourceRequirements{Requests: c.Request, Limits: limits}}},
			}},
		}}
	}
	return &berthv1.Workload{ObjectMeta: meta, Spec: berthv1.WorkloadSpec{
		QueueName: LocalQueueName,
		Priority:  c.Priority,
		PodSets:   []berthv1.PodSet{{Name: "main", Count: c.PodsPerGang, Requests: c.Request}},
		Topology:  topology,
	}}
}

// isNative reports whether r is a resource of the kubernetes.io namespace.
func isNative(r corev1.ResourceName) bool {
	switch r {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
		return true
	}
	return false
}

// retriable reports whether a write may succeed if tried again.
func retriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// work performs actions until ctx ends. reader reads the informer's cache.
func (t *tracker) work(ctx context.Context, c client.Client, reader client.Reader) {
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-t.actions:
			if err := t.do(ctx, c, reader, a); err != nil && ctx.Err() == nil {
				a.tries++
				if a.tries > 20 {
					t.failed(a.wl, fmt.Errorf("giving up after %d tries: %w", a.tries, err))
					continue
				}
				time.AfterFunc(100*time.Millisecond, func() { t.actions <- a })
			}
		}
	}
}

// do performs one action.
func (t *tracker) do(ctx context.Context, c client.Client, reader client.Reader, a action) error {
	w := t.wls[a.wl]
	key := client.ObjectKey{Namespace: t.cqs[w.ClusterQueue].Name, Name: w.Name}
	if a.kind == actionFinish && !t.current(a.wl, a.run) {
		return nil // evicted since; the next admission has its own timer
	}
	if t.mode == ModeJobs {
		// A finished Job that is deleted releases its quota like a
		// completed one (berth deletes its Workload); this needs no Job
		// controller.
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting job %s: %w", key, err)
		}
		return nil
	}
	wl := &berthv1.Workload{}
	if err := reader.Get(ctx, key, wl); err != nil {
		return fmt.Errorf("reading workload %s: %w", key, err)
	}
	writer := persist.Writer{Client: c, Reader: c, Clock: clock.RealClock{}}
	if a.kind == actionRequeue {
		_, err := writer.Write(ctx, wl, lifecycle.Requeue{Message: "stopped by the perf runner after eviction"})
		return err
	}
	if !lifecycle.MayRun(lifecycle.PhaseOf(wl)) {
		return nil // evicted meanwhile: the eviction requeues it
	}
	runtime := t.s.Classes[w.Class].Runtime.Duration
	// The watch sees the finish (see tracker.observe).
	written, err := writer.Write(ctx, wl, lifecycle.Finish{Succeeded: true, Message: fmt.Sprintf("ran for %s", runtime)})
	if written {
		t.finishWritten(a.wl, time.Now())
	}
	return err
}
