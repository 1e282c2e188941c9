// Package oracle checks berth's promises on a running control plane: it
// records every version of the Workloads, Pods and ClusterQueues by watch,
// replays them in etcd revision order and reports each broken invariant
// (Replay), and waits for the cluster to settle with no job lost and no
// object orphaned (Settled).
//
// The recorder watches with its own client, straight to the API server, so
// faults injected between berth and the API server do not reach it. Its
// watches resume from the last revision they saw; a watch that cannot
// resume (410 Gone) would lose versions, so the recorder reports it as a
// violation of its own instead of guessing.
package oracle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Options configure a Recorder.
type Options struct {
	// Namespaces are managed: every pod bound in them must belong to an
	// admitted Workload. Pods elsewhere count only if berth started them.
	Namespaces []string
}

// Recorder records object versions until Stop. It is safe for concurrent
// use.
type Recorder struct {
	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	obs      []Observation
	problems []string
}

// Start lists and then watches Workloads, Pods and ClusterQueues in every
// namespace, and returns once the lists are recorded, so every write after
// Start is seen.
func Start(ctx context.Context, cfg *rest.Config, o Options) (*Recorder, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the oracle's client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{opts: o, cancel: cancel}
	for _, l := range []client.ObjectList{&berthv1.ClusterQueueList{}, &berthv1.WorkloadList{}, &corev1.PodList{}} {
		rv, err := r.list(ctx, c, l)
		if err != nil {
			cancel()
			r.wg.Wait()
			return nil, err
		}
		r.wg.Add(1)
		go r.watch(ctx, c, l, rv)
	}
	return r, nil
}

// Stop ends the watches.
func (r *Recorder) Stop() {
	r.cancel()
	r.wg.Wait()
}

// Violations replays everything recorded so far and returns the broken
// invariants, with any versions the recorder may have missed.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	obs := append([]Observation(nil), r.obs...)
	problems := append([]string(nil), r.problems...)
	r.mu.Unlock()
	return append(problems, Replay(obs, r.opts.Namespaces)...)
}

// Observed is how many versions were recorded.
func (r *Recorder) Observed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.obs)
}

func (r *Recorder) list(ctx context.Context, c client.WithWatch, l client.ObjectList) (string, error) {
	if err := c.List(ctx, l); err != nil {
		return "", fmt.Errorf("listing %T: %w", l, err)
	}
	lm, ok := l.(metav1.ListInterface)
	if !ok {
		return "", fmt.Errorf("%T is not a list", l)
	}
	var items []client.Object
	switch l := l.(type) {
	case *berthv1.ClusterQueueList:
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
	case *berthv1.WorkloadList:
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
	case *corev1.PodList:
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
	}
	for _, o := range items {
		r.record(o, false, true)
	}
	return lm.GetResourceVersion(), nil
}

// watch follows one resource from rv until ctx ends, resuming after each
// closed stream from the last revision seen.
func (r *Recorder) watch(ctx context.Context, c client.WithWatch, l client.ObjectList, rv string) {
	defer r.wg.Done()
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, l, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if ctx.Err() == nil {
				r.problem(fmt.Sprintf("watching %T from revision %s: %v", l, rv, err))
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		next, gone := r.drain(ctx, w, rv)
		w.Stop()
		if gone {
			r.problem(fmt.Sprintf("the watch of %T could not resume from revision %s: versions may be missing", l, rv))
			return
		}
		rv = next
	}
}

// drain records the events of one watch stream and returns the last
// revision it saw, and whether the stream ended because that revision is
// no longer available.
func (r *Recorder) drain(ctx context.Context, w watch.Interface, rv string) (string, bool) {
	for {
		select {
		case <-ctx.Done():
			return rv, false
		case e, ok := <-w.ResultChan():
			if !ok {
				return rv, false
			}
			switch e.Type {
			case watch.Error:
				if st, ok := e.Object.(*metav1.Status); ok && st.Code == 410 {
					return rv, true
				}
				return rv, false
			case watch.Bookmark:
				if o, ok := e.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
			case watch.Added, watch.Modified, watch.Deleted:
				o, ok := e.Object.(client.Object)
				if !ok {
					continue
				}
				r.record(o, e.Type == watch.Deleted, false)
				rv = o.GetResourceVersion()
			}
		}
	}
}

func (r *Recorder) record(o client.Object, deleted, listed bool) {
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		r.problem(fmt.Sprintf("resourceVersion %q of %s is not a number: revisions cannot be ordered", o.GetResourceVersion(), o.GetName()))
		return
	}
	ob := Observation{RV: rv, Deleted: deleted, Listed: listed}
	switch o := o.(type) {
	case *berthv1.Workload:
		ob.Workload = trimWorkload(o)
	case *corev1.Pod:
		ob.Pod = trimPod(o)
	case *berthv1.ClusterQueue:
		ob.ClusterQueue = o
	default:
		return
	}
	r.mu.Lock()
	r.obs = append(r.obs, ob)
	r.mu.Unlock()
}

func (r *Recorder) problem(s string) {
	r.mu.Lock()
	r.problems = append(r.problems, s)
	r.mu.Unlock()
}

// errNotSettled marks a Settled check that has not passed yet.
var errNotSettled = errors.New("not settled")

// trimWorkload keeps what Replay reads of a Workload, so hours of
// versions fit in memory: identity, deletion, what its pods request,
// its admission and what decides whether it holds quota (conditions
// without their messages, provisioning state).
func trimWorkload(wl *berthv1.Workload) *berthv1.Workload {
	out := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID, ResourceVersion: wl.ResourceVersion,
			DeletionTimestamp: wl.DeletionTimestamp},
		Status: berthv1.WorkloadStatus{Admission: wl.Status.Admission},
	}
	for _, ps := range wl.Spec.PodSets {
		out.Spec.PodSets = append(out.Spec.PodSets, berthv1.PodSet{Name: ps.Name, Count: ps.Count, Requests: ps.Requests})
	}
	for _, c := range wl.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason})
	}
	if p := wl.Status.Provisioning; p != nil {
		out.Status.Provisioning = &berthv1.ProvisioningStatus{State: p.State, GaveUp: p.GaveUp}
	}
	return out
}

// trimPod keeps what Replay reads of a Pod: identity, berth's labels, its
// record and gate, node, phase and the requests of its containers.
func trimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, Overhead: p.Spec.Overhead},
		Status:     corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, k := range []string{berthv1.WorkloadLabel, berthv1.PodSetLabel, berthv1.QueueNameLabel} {
		if v, ok := p.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	// A replica's record, and whether berth still gates the pod, say
	// whether the record counts (lifecycle.RecordOf).
	if v, ok := p.Annotations[berthv1.AdmissionRecordAnnotation]; ok {
		out.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: v}
	}
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == berthv1.AdmissionGate {
			out.Spec.SchedulingGates = []corev1.PodSchedulingGate{g}
		}
	}
	trim := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	out.Spec.Containers, out.Spec.InitContainers = trim(p.Spec.Containers), trim(p.Spec.InitContainers)
	return out
}
