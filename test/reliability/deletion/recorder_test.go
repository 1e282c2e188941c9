package deletion_test

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

// recorder watches one namespace's Workloads and pods and records every
// moment an invariant broke:
//   - the admitted Workloads hold more GPUs than the quota;
//   - the bound pods that have not ended hold more GPUs than the quota
//     (quota handed out while GPUs were still in use);
//   - a Workload gained an admission while it was being deleted, or gained
//     one twice without being evicted in between (admitted twice).
//
// Every event is applied in the order the API server sent it, so a state
// between two events is a state the cluster was in.
type recorder struct {
	limit  int64
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu       sync.Mutex
	broken   []string
	admitted map[types.UID]int64
	bound    map[types.UID]int64
	// admissions counts, per Workload, the admissions since its last
	// eviction.
	admissions map[types.UID]int
}

func startRecorder(ctx context.Context, env *framework.Env, ns string, limitGPUs int64) (*recorder, error) {
	wc, err := client.NewWithWatch(env.Plane.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a watching client: %w", err)
	}
	wls, err := wc.Watch(ctx, &berthv1.WorkloadList{}, client.InNamespace(ns))
	if err != nil {
		return nil, fmt.Errorf("watching Workloads: %w", err)
	}
	pods, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		wls.Stop()
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &recorder{limit: limitGPUs, cancel: cancel, admitted: map[types.UID]int64{}, bound: map[types.UID]int64{},
		admissions: map[types.UID]int{}}
	r.done.Add(2)
	go r.run(ctx, wls, r.workload)
	go r.run(ctx, pods, r.pod)
	return r, nil
}

func (r *recorder) run(ctx context.Context, w watch.Interface, apply func(watch.Event)) {
	defer r.done.Done()
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			r.mu.Lock()
			apply(ev)
			r.mu.Unlock()
		}
	}
}

func (r *recorder) workload(ev watch.Event) {
	wl, ok := ev.Object.(*berthv1.Workload)
	if !ok {
		return
	}
	_, had := r.admitted[wl.UID]
	has := lifecycle.HoldsQuota(lifecycle.PhaseOf(wl)) && ev.Type != watch.Deleted
	if has && !had {
		if !wl.DeletionTimestamp.IsZero() {
			r.broke("Workload %s was admitted while being deleted", wl.Name)
		}
		if r.admissions[wl.UID]++; r.admissions[wl.UID] > 1 {
			r.broke("Workload %s was admitted twice without an eviction", wl.Name)
		}
	}
	if c := findCondition(wl, berthv1.ConditionEvicted); c != nil && c.Status == metav1.ConditionTrue && !has {
		r.admissions[wl.UID] = 0
	}
	delete(r.admitted, wl.UID)
	if has {
		r.admitted[wl.UID] = workloadGPUs(wl)
	}
	if sum := total(r.admitted); sum > r.limit {
		r.broke("admitted Workloads hold %d GPUs, over the quota of %d (after %s of %s)", sum, r.limit, ev.Type, wl.Name)
	}
}

func (r *recorder) pod(ev watch.Event) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	delete(r.bound, pod.UID)
	ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if ev.Type != watch.Deleted && pod.Spec.NodeName != "" && !ended {
		r.bound[pod.UID] = podGPUs(pod)
	}
	if sum := total(r.bound); sum > r.limit {
		r.broke("bound pods hold %d GPUs, over the quota of %d (after %s of pod %s)", sum, r.limit, ev.Type, pod.Name)
	}
}

func (r *recorder) broke(format string, args ...any) {
	r.broken = append(r.broken, fmt.Sprintf(format, args...))
}

// stop ends the watches.
func (r *recorder) stop() {
	r.cancel()
	r.done.Wait()
}

// violations lists what broke, in order.
func (r *recorder) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.broken...)
}

func total(m map[types.UID]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// workloadGPUs is the GPUs a Workload's admission holds.
func workloadGPUs(wl *berthv1.Workload) int64 {
	if wl.Status.Admission == nil {
		return 0
	}
	counts := map[string]int32{}
	for _, a := range wl.Status.Admission.PodSetAssignments {
		counts[a.Name] = a.Count
	}
	var n int64
	for _, ps := range wl.Spec.PodSets {
		q := ps.Requests[builders.GPU]
		n += q.Value() * int64(counts[ps.Name])
	}
	return n
}

func podGPUs(pod *corev1.Pod) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		q := c.Resources.Requests[builders.GPU]
		n += q.Value()
	}
	return n
}

// usedGPUs is the GPUs a ClusterQueue's status counts as in use.
func usedGPUs(cq *berthv1.ClusterQueue) int64 {
	var n int64
	for _, f := range cq.Status.FlavorsUsage {
		for _, r := range f.Resources {
			if r.Name == builders.GPU {
				n += r.Total.Value()
			}
		}
	}
	return n
}

func findCondition(wl *berthv1.Workload, t string) *metav1.Condition {
	for i := range wl.Status.Conditions {
		if wl.Status.Conditions[i].Type == t {
			return &wl.Status.Conditions[i]
		}
	}
	return nil
}

// ownerExists reports whether the object an owner reference names exists
// with that UID (and is not merely a new object of the same name).
func ownerExists(ctx context.Context, ns string, ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gv.WithKind(ref.Kind))
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	return err == nil && obj.UID == ref.UID
}
