package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/faultproxy"
	"github.com/berth-dev/berth/test/oracle"
	"github.com/berth-dev/berth/test/reliability/soakstats"
	"github.com/berth-dev/berth/test/scale"
)

// soakSettings are the soak's knobs. make test runs it briefly; make soak
// runs it for hours (docs/reliability.md).
type soakSettings struct {
	duration, faultEvery time.Duration
	report               string
}

func soakFromEnv() soakSettings {
	// make test runs the rotation for a minute, a fault every 8 s; make
	// test-long the same soak at the pace of its first version (90 s, a
	// fault every 15 s); make soak for hours.
	s := soakSettings{duration: scale.Pick(60*time.Second, 90*time.Second), faultEvery: scale.Pick(8*time.Second, 15*time.Second),
		report: os.Getenv("BERTH_SOAK_REPORT")}
	for name, d := range map[string]*time.Duration{"BERTH_SOAK_DURATION": &s.duration, "BERTH_SOAK_FAULT_EVERY": &s.faultEvery} {
		if v := os.Getenv(name); v != "" {
			parsed, err := time.ParseDuration(v)
			Expect(err).NotTo(HaveOccurred(), "%s=%q is not a duration (e.g. 2h, 3m)", name, v)
			*d = parsed
		}
	}
	return s
}

// soak is the running soak: its load, faults and readings.
type soak struct {
	set     *replicaSet
	proxies []*faultproxy.Proxy
	ns      string
	start   time.Time

	mu      sync.Mutex
	created int
	faults  map[string]int
	samples []soakstats.Sample
}

var _ = Describe("a soak of steady load and faults", func() {
	It("keeps every promise and does not grow", Label("soak"), func(ctx SpecContext) {
		settings := soakFromEnv()
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 7))
		s := &soak{ns: "soak", faults: map[string]int{}, start: time.Now()}
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})).To(Succeed())
		rec, err := oracle.Start(ctx, plane.Config, oracle.Options{Namespaces: []string{s.ns}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rec.Stop)
		pctx, stopProxies := context.WithCancel(context.Background())
		DeferCleanup(stopProxies)
		var kubeconfigs []string
		for i := range replicas {
			p, err := faultproxy.Start(pctx, plane.Config, filepath.Join(GinkgoT().TempDir(), fmt.Sprintf("proxy-%d.kubeconfig", i)), rng.Uint64())
			Expect(err).NotTo(HaveOccurred())
			s.proxies = append(s.proxies, p)
			kubeconfigs = append(kubeconfigs, p.Kubeconfig())
		}
		s.set = startReplicas(ctx, kubeconfigs)
		DeferCleanup(s.set.close)
		Expect(k8s.Create(ctx, builders.Flavor(s.ns, nil))).To(Succeed())
		Expect(k8s.Create(ctx, builders.ClusterQueue(s.ns).Quota(s.ns, builders.GPU, strconv.Itoa(4*gpusPerNode), "").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, builders.LocalQueue(s.ns, "team", s.ns))).To(Succeed())

		load, stopLoad := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, f := range []func(context.Context, *rand.Rand){s.submit, s.clean, s.read} {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				f(load, rand.New(rand.NewPCG(rng.Uint64(), 0)))
			}()
		}
		for i := 0; time.Since(s.start) < settings.duration; i++ {
			select {
			case <-ctx.Done():
				Fail("the soak was interrupted")
			case <-time.After(settings.faultEvery):
			}
			s.fault(ctx, i, settings.faultEvery)
		}
		stopLoad()
		wg.Wait()
		for _, p := range s.proxies {
			p.Set()
		}
		Expect(oracle.Settled(ctx, k8s, []string{s.ns}, 10*time.Minute)).To(Succeed())
		violations := rec.Violations()
		s.publish(settings, rec.Observed(), violations)
		Expect(violations).To(BeEmpty())
		Expect(s.growth()).To(BeEmpty(), "a berth process grew while in one role")
	}, SpecTimeout(6*time.Hour))
})

// submit creates Jobs of 1 to 8 GPUs, running 1 to 3 s, at about two a
// second until ctx ends.
func (s *soak) submit(ctx context.Context, rng *rand.Rand) {
	cfg := rest.CopyConfig(plane.Config)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	sizes := []string{"1", "2", "4", "8"}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		job := builders.Job(s.ns, "job-"+strconv.Itoa(i), "team").Request(builders.GPU, sizes[rng.IntN(len(sizes))]).
			PodAnnotations(controlplane.RunFor(time.Duration(1+rng.IntN(3)) * time.Second)).Obj()
		if err := createRetrying(ctx, c, job); err != nil && ctx.Err() == nil {
			Fail(fmt.Sprintf("creating job %d: %v", i, err))
		}
		s.mu.Lock()
		s.created++
		s.mu.Unlock()
	}
}

// clean deletes finished Jobs, as a TTL controller would, so a soak of
// hours holds a steady number of objects.
func (s *soak) clean(ctx context.Context, _ *rand.Rand) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		jobs := &batchv1.JobList{}
		if err := k8s.List(ctx, jobs, client.InNamespace(s.ns)); err != nil {
			continue
		}
		for i := range jobs.Items {
			if j := &jobs.Items[i]; j.Status.CompletionTime != nil {
				_ = client.IgnoreNotFound(k8s.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)))
			}
		}
	}
}

// read samples the memory and goroutines of every running replica every
// 5 s.
func (s *soak) read(ctx context.Context, _ *rand.Rand) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		for i, p := range s.set.procs {
			if p == nil || p.Running() != nil {
				continue
			}
			rss, errRSS := rssKiB(p.PID())
			gr, leader, errMetrics := readMetrics(ctx, s.set.metrics[i])
			if errRSS != nil || errMetrics != nil {
				continue // stopping or starting
			}
			s.mu.Lock()
			s.samples = append(s.samples, soakstats.Sample{At: time.Since(s.start), Process: fmt.Sprintf("berth-%d pid %d", i, p.PID()),
				Leader: leader, RSSKiB: rss, Goroutines: gr})
			s.mu.Unlock()
		}
	}
}

// fault injects the i-th fault of the rotation, lasting about window.
func (s *soak) fault(ctx context.Context, i int, window time.Duration) {
	kinds := []string{"SIGKILL leader", "admission writes commit, then 504", "SIGSTOP leader past its lease",
		"watch streams cut, resumed with 410", "throttling and latency", "restart of both replicas"}
	kind := kinds[i%len(kinds)]
	By(fmt.Sprintf("%s at %s", kind, time.Since(s.start).Round(time.Second)))
	switch kind {
	case "SIGKILL leader":
		l, holder := s.set.leader(ctx, "")
		Expect(s.set.procs[l].Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(s.set.procs[l].Exited()).WithTimeout(time.Minute).Should(BeClosed())
		s.set.leader(ctx, holder)
		s.set.start(ctx, l)
	case "SIGSTOP leader past its lease":
		l, holder := s.set.leader(ctx, "")
		Expect(s.set.procs[l].Signal(syscall.SIGSTOP)).To(Succeed())
		s.set.leader(ctx, holder)
		Expect(s.set.procs[l].Signal(syscall.SIGCONT)).To(Succeed())
		Eventually(s.set.procs[l].Exited()).WithTimeout(time.Minute).Should(BeClosed())
		s.set.start(ctx, l)
	case "restart of both replicas":
		s.set.stopAll()
		for r := range s.set.procs {
			s.set.start(ctx, r)
		}
	default:
		s.window(ctx, kind, window/2)
	}
	s.mu.Lock()
	s.faults[kind]++
	s.mu.Unlock()
}

// window turns an API fault on in both proxies for d.
func (s *soak) window(ctx context.Context, kind string, d time.Duration) {
	faults := map[string][]faultproxy.Fault{
		"admission writes commit, then 504":   {{Kind: faultproxy.CommitThen504, Match: faultproxy.WorkloadStatusWrite, Probability: 0.3}},
		"watch streams cut, resumed with 410": {{Kind: faultproxy.CutWatch, After: 3 * time.Second, Probability: 0.5}},
		"throttling and latency": {{Kind: faultproxy.Throttle, Probability: 0.2},
			{Kind: faultproxy.Latency, Delay: time.Second, Probability: 0.1}},
	}[kind]
	for _, p := range s.proxies {
		p.Set(faults...)
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	for _, p := range s.proxies {
		p.Set()
	}
}

func rssKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// readMetrics reads a process's goroutines and whether it leads from its
// metrics endpoint.
func readMetrics(ctx context.Context, port int) (goroutines int64, leader bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			if goroutines, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, false, err
			}
			found = true
		}
		// controller-runtime's leader election gauge: 1 while it leads.
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			leader = true
		}
	}
	if !found {
		return 0, false, fmt.Errorf("no go_goroutines on port %d", port)
	}
	return goroutines, leader, nil
}
