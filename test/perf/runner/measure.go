package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/perf/procstat"
)

// requestsMetric is client-go's request counter, as controller-runtime
// exposes it: rest_client_requests_total{code, method, host}.
const requestsMetric = "rest_client_requests_total"

// snapshot is what the runner reads of the processes at one moment.
type snapshot struct {
	at       time.Time
	berth    procstat.Sample
	plane    map[string]procstat.Sample // by component
	runner   procstat.Sample
	metrics  []Sample // berth's
	requests map[string]int
}

// measurement is everything a run observed.
type measurement struct {
	tracker       *tracker
	t0            time.Time
	before, after snapshot
	audit         *AuditCounts // nil without audit
	berthArgs     []string
	berthLog      string
	timedOut      bool
}

// measure sets up the queues, starts berth, runs the load and collects
// what berth and the plane did. It returns a nil measurement only when
// nothing was measured.
func measure(ctx context.Context, o *Options, cl *cluster, bin, dir string) (*measurement, error) {
	kubeconfig, err := cl.berthKubeconfig()
	if err != nil {
		return nil, err
	}
	if err := cl.setupQueues(ctx, o.Scenario, o.Preemption); err != nil {
		return nil, err
	}
	args := append([]string{}, o.BerthArgs...)
	berth, err := startBerth(ctx, bin, kubeconfig, filepath.Join(dir, "berth-controller.log"), o.QPS, o.Burst, args)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = berth.Stop()
		}
	}()
	if err := cl.waitQueuesActive(ctx, len(o.Scenario.ClusterQueues()), berth, 5*time.Minute); err != nil {
		return nil, err
	}
	m := &measurement{tracker: newTracker(o.Scenario, o.Mode), berthArgs: berth.Args, berthLog: berth.LogPath}
	m.tracker.trace = o.Trace
	loadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	informers, err := startInformer(loadCtx, cl, m.tracker)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for range o.Finishers {
		wg.Go(func() { m.tracker.work(loadCtx, cl.client, informers) })
	}
	if m.before, err = takeSnapshot(ctx, berth, cl); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "berth ready; creating %d workloads\n", len(m.tracker.wls))
	m.t0 = time.Now()
	loadErr := m.load(loadCtx, o, cl, berth, &wg)
	m.after, err = takeSnapshot(ctx, berth, cl)
	cancel()
	wg.Wait()
	stopErr := berth.Stop()
	stopped = true
	if err == nil && cl.auditLog != "" {
		// The batch audit backend flushes at least every second.
		time.Sleep(2 * time.Second)
		var counts AuditCounts
		if counts, err = readAudit(cl.auditLog, berthUser, m.t0, m.after.at); err == nil {
			m.audit = &counts
		}
	}
	return m, errors.Join(loadErr, err, stopErr)
}

// load creates the workloads and waits until every one has finished, berth
// exits, or the timeout passes.
func (m *measurement) load(ctx context.Context, o *Options, cl *cluster, berth *berthProcess, wg *sync.WaitGroup) error {
	t := m.tracker
	wg.Go(func() { t.submit(ctx, cl.client, m.t0, o.Creators) })
	sample := time.NewTicker(o.SampleInterval)
	defer sample.Stop()
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	timeout := time.NewTimer(o.Timeout)
	defer timeout.Stop()
	for {
		select {
		case <-t.done:
			t.sample(time.Since(m.t0))
			return nil
		case <-sample.C:
			t.sample(time.Since(m.t0))
		case <-progress.C:
			created, admitted, finished := t.progress()
			fmt.Fprintf(o.Progress, "%6.0fs  created %d  admitted %d  finished %d  of %d\n",
				time.Since(m.t0).Seconds(), created, admitted, finished, len(t.wls))
			if err := berth.Running(); err != nil {
				return err
			}
		case <-timeout.C:
			m.timedOut = true
			return fmt.Errorf("the run did not finish within %s", o.Timeout)
		case <-ctx.Done():
			return fmt.Errorf("run interrupted: %w", ctx.Err())
		}
	}
}

// startInformer starts the runner's informer on Workloads, feeding every
// state it sees to the tracker, and returns its cache once synced.
func startInformer(ctx context.Context, cl *cluster, t *tracker) (cache.Cache, error) {
	c, err := cache.New(cl.cfg, cache.Options{Scheme: cl.scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the runner's cache: %w", err)
	}
	inf, err := c.GetInformer(ctx, &berthv1.Workload{})
	if err != nil {
		return nil, fmt.Errorf("informer on Workloads: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
		DeleteFunc: t.deleted,
	}); err != nil {
		return nil, fmt.Errorf("watching Workloads: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the runner's Workload cache did not sync")
	}
	return c, nil
}

// takeSnapshot reads CPU and memory of berth, the plane's processes and
// the runner, and berth's client metrics.
func takeSnapshot(ctx context.Context, berth *berthProcess, cl *cluster) (snapshot, error) {
	s := snapshot{at: time.Now(), plane: map[string]procstat.Sample{}, requests: cl.requests.snapshot()}
	var err error
	if s.berth, err = procstat.Read(berth.PID()); err != nil {
		return s, err
	}
	for name, pid := range procstat.ChildrenNamed("kube-apiserver", "etcd") {
		if p, err := procstat.Read(pid); err == nil {
			s.plane[name] = p
		}
	}
	if s.runner, err = procstat.Read(os.Getpid()); err != nil {
		return s, err
	}
	s.metrics, err = scrape(ctx, berth.metricsURL, requestsMetric)
	return s, err
}
