package burst

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// Stages splits the berth run's time per gang, in seconds: from creation
// until berth's Workload appeared (every pod created, the Workload written),
// from then until it was admitted, and from admission until every pod was
// bound (pods released, kube-scheduler's bindings). Each is the p50 and
// p95 over the complete gangs.
type Stages struct {
	ToWorkloadP50 float64 `json:"toWorkloadP50Seconds"`
	ToWorkloadP95 float64 `json:"toWorkloadP95Seconds"`
	ToAdmittedP50 float64 `json:"toAdmittedP50Seconds"`
	ToAdmittedP95 float64 `json:"toAdmittedP95Seconds"`
	ToBoundP50    float64 `json:"toBoundP50Seconds"`
	ToBoundP95    float64 `json:"toBoundP95Seconds"`
}

// workloads records when each gang's Workload was first seen, and first
// seen admitted, keyed by the gang key berth labels it with.
type workloads struct {
	mu       sync.Mutex
	seen     map[string]time.Time
	admitted map[string]time.Time
}

func (w *workloads) observe(obj any) {
	wl, ok := obj.(*berthv1.Workload)
	if !ok {
		return
	}
	key, now := wl.Labels[berthv1.JobKeyLabel], time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[key]; !ok {
		w.seen[key] = now
	}
	if _, ok := w.admitted[key]; !ok && wl.Status.Admission != nil {
		w.admitted[key] = now
	}
}

// watchWorkloads starts recording the Workloads of namespace ns until ctx
// ends.
func watchWorkloads(ctx context.Context, env *framework.Env, cfg *rest.Config, ns string) (*workloads, error) {
	w := &workloads{seen: map[string]time.Time{}, admitted: map[string]time.Time{}}
	c, err := cache.New(cfg, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, fmt.Errorf("creating Workload cache: %w", err)
	}
	inf, err := c.GetInformer(ctx, &berthv1.Workload{})
	if err != nil {
		return nil, fmt.Errorf("watching Workloads: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching Workloads: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Workload cache of %s did not sync", ns)
	}
	return w, nil
}

// stages splits each complete gang's time at its Workload's appearance
// and admission.
func (w *workloads) stages(created []time.Time, seen *binds, maxSize int) Stages {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen.mu.Lock()
	defer seen.mu.Unlock()
	byGang := seen.byGang()
	var toWorkload, toAdmitted, toBound []time.Duration
	for i, start := range created {
		key := gangName(i)
		last, complete := lastBind(byGang[key], GangSize(i, maxSize))
		appeared, ok1 := w.seen[key]
		admitted, ok2 := w.admitted[key]
		if !complete || !ok1 || !ok2 {
			continue
		}
		toWorkload = append(toWorkload, appeared.Sub(start))
		toAdmitted = append(toAdmitted, admitted.Sub(appeared))
		toBound = append(toBound, last.Sub(admitted))
	}
	w1, w2, w3 := scenario.Summarize(toWorkload), scenario.Summarize(toAdmitted), scenario.Summarize(toBound)
	return Stages{
		ToWorkloadP50: w1.P50.Seconds(), ToWorkloadP95: w1.P95.Seconds(),
		ToAdmittedP50: w2.P50.Seconds(), ToAdmittedP95: w2.P95.Seconds(),
		ToBoundP50: w3.P50.Seconds(), ToBoundP95: w3.P95.Seconds(),
	}
}
