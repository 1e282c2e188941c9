package burst

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/perf/procstat"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// GangLabel names the gang a pod belongs to, in both runs.
const GangLabel = "perf.berth.dev/gang"

// creators is how many gangs are created concurrently: enough that a slow
// create never delays the next arrival.
const creators = 32

// phaser runs one arrival of every gang into a namespace of its own.
type phaser struct {
	env *framework.Env
	cfg *rest.Config
	o   Options
	// writes counts berth's writes (BerthOptions.WrapTransport).
	writes *framework.WriteCounter
	// load and dynamic are the load's clients, with cfg's limits.
	load    client.Client
	dynamic dynamic.Interface
}

// binds records when each pod was first seen bound to a node, and its
// gang.
type binds struct {
	mu   sync.Mutex
	when map[string]time.Time
	gang map[string]string
}

func newBinds() *binds { return &binds{when: map[string]time.Time{}, gang: map[string]string{}} }

func (b *binds) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.when[pod.Name]; !seen {
		b.when[pod.Name], b.gang[pod.Name] = now, pod.Labels[GangLabel]
	}
}

func (b *binds) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.when)
}

// byGang is when each gang's pods were first seen bound, by gang name;
// b.mu must be held.
func (b *binds) byGang() map[string][]time.Time {
	out := map[string][]time.Time{}
	for pod, t := range b.when {
		out[b.gang[pod]] = append(out[b.gang[pod]], t)
	}
	return out
}

// lastBind is when the last of a gang's size pods was seen bound, from
// its pods' bind times, and whether all were.
func lastBind(times []time.Time, size int) (time.Time, bool) {
	var last time.Time
	for _, t := range times {
		if t.After(last) {
			last = t
		}
	}
	return last, len(times) >= size
}

// run creates every gang in namespace ns on schedule, through berth when
// throughBerth, waits until every pod is bound (or the phase times out),
// and measures each gang from the creation of its first pod until its last
// pod was seen bound. The floor's namespace is emptied again afterwards so
// that the berth run finds the same free capacity.
func (p *phaser) run(ctx context.Context, ns string, throughBerth bool) (Phase, error) {
	ph := Phase{Namespace: ns, ThroughBerth: throughBerth, Gangs: p.o.Gangs, Pods: Pods(p.o.Gangs, p.o.MaxGangSize)}
	if err := p.prepare(ctx, ns, throughBerth); err != nil {
		return ph, err
	}
	cs, err := kubernetes.NewForConfig(p.cfg)
	if err != nil {
		return ph, fmt.Errorf("creating clientset: %w", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	seen, err := watchBinds(cs, ns, stop)
	if err != nil {
		return ph, err
	}
	var wls *workloads
	if throughBerth {
		watchCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		if wls, err = watchWorkloads(watchCtx, p.env, p.cfg, ns); err != nil {
			return ph, err
		}
	}

	if throughBerth && p.o.APIServerProfile != "" {
		done := p.profileAPIServer(ctx, ns)
		defer func() { <-done }()
	}
	if err := p.createScalables(ctx, cs, ns, throughBerth); err != nil {
		return ph, err
	}
	before := sampleCPU()
	calls, err := framework.WebhookCalls()
	if err != nil {
		return ph, err
	}
	writes := p.writes.Snapshot()
	created, span, err := p.arrive(ctx, cs, ns, throughBerth)
	ph.CreateSpan = span.Seconds()
	if err != nil {
		return ph, err
	}
	arrived := "pods created"
	if p.o.Shape != ShapePods {
		arrived = "pods asked for by scale-ups"
	}
	fmt.Fprintf(p.o.Progress, "  %d %s in %.1fs; waiting for every pod to be bound\n", ph.Pods, arrived, span.Seconds())
	waitErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, p.o.PhaseTimeout, true,
		func(context.Context) (bool, error) { return seen.count() >= ph.Pods, nil })
	ph.measure(created, seen, p.o.MaxGangSize)
	ph.CPUSeconds = cpuSince(before)
	if ph.WebhookCalls, err = webhookCallsSince(calls); err != nil {
		return ph, err
	}
	if throughBerth {
		ph.BerthWrites = p.writes.Since(writes)
		if err := p.berthResults(ctx, &ph, wls, created, seen); err != nil {
			return ph, err
		}
	}
	fmt.Fprintf(p.o.Progress, "  %d of %d gangs bound, %d partly; p50 %.2fs p95 %.2fs max %.2fs\n",
		ph.Complete, ph.Gangs, ph.Partial, ph.P50, ph.P95, ph.Max)
	if waitErr != nil {
		return ph, fmt.Errorf("%d of %d pods bound: %w", seen.count(), ph.Pods, waitErr)
	}
	if !throughBerth {
		return ph, emptyNamespace(ctx, p.env.Client, ns, p.o.DeletePage, p.o.Shape)
	}
	return ph, nil
}

// arrive creates gang i at start + i×window/gangs and returns when each
// gang's creation began and how long all creations took.
func (p *phaser) arrive(ctx context.Context, cs kubernetes.Interface, ns string, throughBerth bool) ([]time.Time, time.Duration, error) {
	created := make([]time.Time, p.o.Gangs)
	var start time.Time
	err := fanOut(func(next chan<- int) {
		start = time.Now()
		for i := range p.o.Gangs {
			due := start.Add(time.Duration(i) * p.o.Window / time.Duration(p.o.Gangs))
			select {
			case <-time.After(time.Until(due)):
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				return
			}
			next <- i
		}
	}, func(i int) error {
		created[i] = time.Now()
		return p.arriveGang(ctx, cs, ns, i, throughBerth)
	})
	return created, time.Since(start), errors.Join(err, ctx.Err())
}

// fanOut runs work for each index feed sends, on creators goroutines, so
// that a slow request never delays the next; a goroutine whose work
// failed takes no more. It returns once feed returned and all work ended,
// with the errors.
func fanOut(feed func(next chan<- int), work func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	for range creators {
		wg.Go(func() {
			var failed error
			for i := range next {
				if failed == nil {
					failed = work(i)
				}
			}
			errs <- failed
		})
	}
	feed(next)
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// prepare creates namespace ns and, for a berth run, its queues, and
// waits until berth serves them.
func (p *phaser) prepare(ctx context.Context, ns string, throughBerth bool) error {
	if err := p.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	if !throughBerth {
		return nil
	}
	if err := createQueues(ctx, p.env, ns, p.o.Nodes*gpusPerNode); err != nil {
		return err
	}
	return waitActive(ctx, p.env.Client, ns)
}

// berthResults fills what only a berth run has: its stages, the
// Workloads it admitted and the pods that run on records.
func (p *phaser) berthResults(ctx context.Context, ph *Phase, wls *workloads, created []time.Time, seen *binds) error {
	if p.o.Shape == ShapePods {
		// The stages are keyed by a pod group's Workload; replicas admitted
		// on records have none to split at.
		st := wls.stages(created, seen, p.o.MaxGangSize)
		ph.Stages = &st
	}
	var err error
	if ph.Workloads, err = admittedWorkloads(ctx, p.env.Client, ph.Namespace); err != nil {
		return err
	}
	ph.Records, err = podsOnRecords(ctx, p.env.Client, ph.Namespace)
	return err
}

// watchBinds records the binds of the pods of ns until stop closes.
func watchBinds(cs kubernetes.Interface, ns string, stop <-chan struct{}) (*binds, error) {
	seen := newBinds()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen.observe,
		UpdateFunc: func(_, obj any) { seen.observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return seen, nil
}

// arriveGang creates gang i's pods, or scales its Deployment up.
func (p *phaser) arriveGang(ctx context.Context, cs kubernetes.Interface, ns string, i int, throughBerth bool) error {
	switch p.o.Shape {
	case ShapeDeployments:
		return scaleUp(ctx, cs, ns, i, GangSize(i, p.o.MaxGangSize))
	case ShapeLeaderWorkerSets:
		return p.scaleUpSet(ctx, ns, i)
	}
	for _, pod := range GangPods(ns, i, p.o.MaxGangSize, throughBerth) {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", ns, pod.Name, err)
		}
	}
	return nil
}

// components are the processes whose CPU time a phase reports: the plane's
// (/proc truncates kube-controller-manager's name to 15 characters) and
// this process, which runs berth and creates the load.
var components = []string{APIServer, "etcd", "kube-scheduler", "kwok", "kube-controller"}

// APIServer names kube-apiserver's CPU in Phase.CPUSeconds.
const APIServer = "kube-apiserver"

// thisProcess names this process's CPU in Phase.CPUSeconds.
const thisProcess = "berth-perf (berth and the load)"

// sampleCPU reads the CPU seconds of each component so far.
func sampleCPU() map[string]float64 {
	out := map[string]float64{}
	pids := procstat.ChildrenNamed(components...)
	pids[thisProcess] = os.Getpid()
	for name, pid := range pids {
		if s, err := procstat.Read(pid); err == nil {
			out[name] = s.CPUSeconds
		}
	}
	return out
}

// cpuSince is the CPU seconds each component used since before.
func cpuSince(before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, now := range sampleCPU() {
		if was, ok := before[name]; ok {
			out[name] = now - was
		}
	}
	return out
}

// measure fills the phase's gang counts and latencies.
func (ph *Phase) measure(created []time.Time, seen *binds, maxSize int) {
	seen.mu.Lock()
	defer seen.mu.Unlock()
	byGang := seen.byGang()
	var latencies []time.Duration
	for i, start := range created {
		times := byGang[gangName(i)]
		last, complete := lastBind(times, GangSize(i, maxSize))
		switch {
		case complete:
			ph.Complete++
			latencies = append(latencies, last.Sub(start))
		case len(times) > 0:
			ph.Partial++
		}
	}
	s := scenario.Summarize(latencies)
	ph.P50, ph.P95, ph.Max = s.P50.Seconds(), s.P95.Seconds(), s.Max.Seconds()
}

func podName(gang, index int) string { return fmt.Sprintf("%s-%d", gangName(gang), index) }

// GangPods are the pods of gang i: a leader and workers, one GPU each,
// which kube-scheduler places on its own, or, through berth, as one pod
// group in LocalQueue "team".
func GangPods(ns string, i, maxSize int, throughBerth bool) []*corev1.Pod {
	size := GangSize(i, maxSize)
	gang := gangName(i)
	gpu := corev1.ResourceList{builders.GPU: resource.MustParse("1")}
	var out []*corev1.Pod
	for j := range size {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName(i, j), Labels: map[string]string{GangLabel: gang}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "registry.invalid/inference:latest",
				Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
		}
		if throughBerth {
			pod.Labels[berthv1.QueueNameLabel] = "team"
			pod.Labels[berthv1.PodGroupLabel] = gang
			pod.Annotations = map[string]string{berthv1.PodGroupTotalCountAnnotation: strconv.Itoa(size)}
		}
		out = append(out, pod)
	}
	return out
}

// waitActive waits until berth reports ClusterQueue name Active, so that the
// berth run measures admission, not berth learning about its queue.
func waitActive(ctx context.Context, c client.Client, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cq := &berthv1.ClusterQueue{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(cq.Status.Conditions, berthv1.ConditionActive), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ClusterQueue %s to be Active: %w", name, err)
	}
	return nil
}

// admittedWorkloads counts the Workloads in ns that hold quota.
func admittedWorkloads(ctx context.Context, c client.Client, ns string) (int, error) {
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("listing Workloads in %s: %w", ns, err)
	}
	n := 0
	for _, wl := range wls.Items {
		if wl.Status.Admission != nil {
			n++
		}
	}
	return n, nil
}

// emptyNamespace deletes what scales the gangs of ns (its Deployments and
// ReplicaSets, or its LeaderWorkerSets and StatefulSets), then every pod in
// it (no kubelet waits for them), page objects at a time
// (Options.DeletePage), and waits until they are gone, freeing their
// nodes. The controllers go first, so that none replaces a pod.
func emptyNamespace(ctx context.Context, c client.Client, ns string, page int64, shape Shape) error {
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	type kind struct {
		list schema.GroupVersionKind
		obj  client.Object
		opt  client.DeleteAllOfOption
	}
	var kinds []kind
	switch shape {
	case ShapeDeployments:
		kinds = []kind{{appsv1.SchemeGroupVersion.WithKind("DeploymentList"), &appsv1.Deployment{}, background},
			{appsv1.SchemeGroupVersion.WithKind("ReplicaSetList"), &appsv1.ReplicaSet{}, background}}
	case ShapeLeaderWorkerSets:
		kinds = []kind{{lwsv1.GroupVersion.WithKind("LeaderWorkerSetList"), &lwsv1.LeaderWorkerSet{}, background},
			{appsv1.SchemeGroupVersion.WithKind("StatefulSetList"), &appsv1.StatefulSet{}, background}}
	}
	kinds = append(kinds, kind{corev1.SchemeGroupVersion.WithKind("PodList"), &corev1.Pod{}, client.GracePeriodSeconds(0)})
	for _, k := range kinds {
		if err := deletePaged(ctx, c, ns, k.list, k.obj, page, k.opt); err != nil {
			return fmt.Errorf("emptying %s: %w", ns, err)
		}
	}
	return nil
}

// deletePaged deletes the objects of obj's kind in ns, page at a time, until
// none is left. One collection delete of a whole burst's objects outlives
// the API server's request timeout on two cores; the API server's
// collection delete lists with the limit and deletes that page only.
func deletePaged(ctx context.Context, c client.Client, ns string, list schema.GroupVersionKind, obj client.Object, page int64, opt client.DeleteAllOfOption) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		objs := &metav1.PartialObjectMetadataList{}
		objs.SetGroupVersionKind(list)
		if err := c.List(ctx, objs, client.InNamespace(ns), client.Limit(1)); err != nil {
			return false, fmt.Errorf("listing %s: %w", list.Kind, err)
		}
		if len(objs.Items) == 0 {
			return true, nil
		}
		paged := &client.DeleteAllOfOptions{ListOptions: client.ListOptions{Namespace: ns, Limit: page}}
		if err := c.DeleteAllOf(ctx, obj, paged, opt); err != nil {
			return false, fmt.Errorf("deleting a page of %s: %w", list.Kind, err)
		}
		return false, nil
	})
}

// webhookCallsSince is how many requests berth's webhook server answered
// since before, by path; paths without one are left out.
func webhookCallsSince(before map[string]float64) (map[string]float64, error) {
	now, err := framework.WebhookCalls()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for path, n := range now {
		if d := n - before[path]; d > 0 {
			out[path] = d
		}
	}
	return out, nil
}

// waitNoWorkloads waits until ns holds no Workload: berth has let go of
// every one of a run's Workloads once their pods are gone.
func waitNoWorkloads(ctx context.Context, c client.Client, ns string) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		wls := &berthv1.WorkloadList{}
		if err := c.List(ctx, wls, client.InNamespace(ns), client.Limit(1)); err != nil {
			return false, fmt.Errorf("listing the Workloads in %s: %w", ns, err)
		}
		return len(wls.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Workloads of %s to go: %w", ns, err)
	}
	return nil
}

// profileAPIServer writes a CPU profile of kube-apiserver over the next
// ProfileSeconds to <APIServerProfile>/apiserver-<ns>.pprof, in the
// background; the channel closes when it is written (or failed, which is
// reported on Progress: a profile is an aid, not a result).
func (p *phaser) profileAPIServer(ctx context.Context, ns string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs, err := kubernetes.NewForConfig(p.env.Plane.Config)
		if err == nil {
			var raw []byte
			raw, err = cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(p.o.ProfileSeconds)).Timeout(time.Duration(p.o.ProfileSeconds+30) * time.Second).DoRaw(ctx)
			if err == nil {
				err = os.WriteFile(filepath.Join(p.o.APIServerProfile, "apiserver-"+ns+".pprof"), raw, 0o644)
			}
		}
		if err != nil {
			fmt.Fprintf(p.o.Progress, "  profiling kube-apiserver: %v\n", err)
		}
	}()
	return done
}
