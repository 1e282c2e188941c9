package provisioning_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/kubectl-berth/commands"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

// tolerance is how far a job's admission and start on the plane may be
// from the simulator's. The simulator leaves out the control plane's own
// steps — the Workload's creation, the Job controller creating pods and
// seeing them finish, kube-scheduler binding them, berth's reaction to each
// — a fraction of a second each, and they add up along a chain of jobs
// that wait for each other: the last job of the scenario follows three.
// Measured: 0.04–1.9 s (docs/coordination.md, "Fidelity").
const tolerance = 5 * time.Second

// The coordination simulator's fidelity check: the shipped fidelity
// scenario, run in the simulator and on this plane with the stand-in
// autoscaler at the scenario's timings, admits the same jobs in the same
// order and admits and starts each within tolerance.
// submitAt returns at the time a trace submits its next job, or when ctx
// ends.
func submitAt(ctx context.Context, at time.Time) {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

var _ = Describe("The coordination simulator", func() {
	It("admits the fidelity scenario's jobs in the order the plane does and starts them within the tolerance", func(ctx SpecContext) {
		dir := filepath.Join(framework.RepoRoot(), "test", "simulation", "fidelity")
		scenarioFile := filepath.Join(dir, "scenario.yaml")
		sc := readFidelityScenario(scenarioFile)
		want, tr := simulate(scenarioFile, filepath.Join(dir, "trace.csv"))

		namespaces := applyScenario(ctx, sc)
		rec := startTimeline(ctx, namespaces, tr)
		t0 := time.Now()
		for _, j := range tr.Jobs {
			// The trace is replayed in real time: each job is submitted at
			// its offset from the first. This is the trace's schedule, not
			// a wait for a condition; the spec's context ends it early.
			submitAt(ctx, t0.Add(j.Submit.Duration))
			Expect(env.Client.Create(ctx, batchJobOf(j))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, j := range tr.Jobs {
				g.Expect(jobsuite.Completed(ctx, env.Client, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.ID}})(g)).To(BeTrue(), "job %s completed", j.ID)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(interval).Should(Succeed())

		got := rec.times(t0)
		for _, w := range want {
			AddReportEntry("fidelity "+w.ID, fmt.Sprintf("simulated admitted %v started %v; plane admitted %v started %v",
				w.Admitted, w.Started, got[w.ID].admitted, got[w.ID].started))
		}
		Expect(admissionOrderGaps(want, got)).To(BeEmpty(), "the plane admits the jobs in the simulator's order")
		Expect(timeGaps(want, got, tolerance)).To(BeEmpty(), "each job is admitted and starts within %s of the simulator's times", tolerance)
	})
})

// simulatedJob is a job of the trace the simulator replayed, as
// simulate's --write-trace writes it in YAML.
type simulatedJob struct {
	ID           string              `json:"id"`
	Submit       metav1.Duration     `json:"submit"`
	Namespace    string              `json:"namespace"`
	LocalQueue   string              `json:"localQueue"`
	Pods         int32               `json:"pods"`
	Requests     corev1.ResourceList `json:"requests"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Topology     struct {
		Mode  string `json:"mode,omitempty"`
		Level string `json:"level,omitempty"`
	} `json:"topology,omitzero"`
	RunTime metav1.Duration `json:"runTime"`
}

// simulatedTrace is the trace simulate replayed.
type simulatedTrace struct {
	Jobs []simulatedJob `json:"jobs"`
}

// jobTimes is one job's entry of a policy's timeline in simulate's JSON
// report: when it was first admitted and first ran whole, from the start
// of the trace (absent: never).
type jobTimes struct {
	ID       string           `json:"id"`
	Admitted *metav1.Duration `json:"admitted,omitempty"`
	Started  *metav1.Duration `json:"started,omitempty"`
}

// simulate runs `kubectl berth simulate` on the scenario and trace files
// under berth's policy, as a user does, and returns the jobs' simulated
// times and the trace it replayed.
func simulate(scenarioFile, traceFile string) ([]jobTimes, simulatedTrace) {
	GinkgoHelper()
	written := filepath.Join(GinkgoT().TempDir(), "trace.yaml")
	var out, errOut bytes.Buffer
	cmd := commands.NewRoot(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	cmd.SetArgs([]string{"simulate", "-f", scenarioFile, "--trace", traceFile, "--policies", "berth",
		"-o", "json", "--timeline", "--write-trace", written})
	Expect(cmd.Execute()).To(Succeed(), "stderr: %s", errOut.String())
	var rep struct {
		Results []struct {
			Policy   string     `json:"policy"`
			Timeline []jobTimes `json:"timeline"`
		} `json:"results"`
	}
	Expect(json.Unmarshal(out.Bytes(), &rep)).To(Succeed())
	Expect(rep.Results).To(HaveLen(1))
	data, err := os.ReadFile(written)
	Expect(err).NotTo(HaveOccurred())
	var tr simulatedTrace
	Expect(yaml.Unmarshal(data, &tr)).To(Succeed())
	return rep.Results[0].Timeline, tr
}

// fidelityScenario is what the spec applies of the scenario file: its
// berth objects, in an order the webhooks accept, its CapacityPools, and
// how many nodes of each pool its Model says exist at the start.
type fidelityScenario struct {
	objects  []*unstructured.Unstructured
	pools    []berthv1.CapacityPool
	existing map[string]int32
}

// creationOrder is the order kinds are created in: a ClusterQueue's
// flavors first, a LocalQueue's ClusterQueue before it.
var creationOrder = []string{"ResourceFlavor", "ClusterQueue", "LocalQueue", "CapacityPool"}

// readFidelityScenario reads the scenario file's documents: the berth
// objects as they are written (the API server defaults them), and of the
// Model document only the nodes each group has at the start.
func readFidelityScenario(path string) fidelityScenario {
	GinkgoHelper()
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	sc := fidelityScenario{existing: map[string]int32{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(f), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		switch {
		case len(u.Object) == 0:
			continue
		case u.GetAPIVersion() != berthv1.GroupVersion.String():
			var model struct {
				Groups map[string]struct {
					Existing *int32 `json:"existing"`
				} `json:"groups"`
			}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &model)).To(Succeed())
			for name, g := range model.Groups {
				sc.existing[name] = ptr.Deref(g.Existing, 0)
			}
			continue
		case u.GetKind() == "CapacityPool":
			var p berthv1.CapacityPool
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p)).To(Succeed())
			sc.pools = append(sc.pools, p)
		}
		Expect(creationOrder).To(ContainElement(u.GetKind()), "a berth object of the scenario")
		sc.objects = append(sc.objects, u)
	}
	slices.SortStableFunc(sc.objects, func(a, b *unstructured.Unstructured) int {
		return cmp.Compare(slices.Index(creationOrder, a.GetKind()), slices.Index(creationOrder, b.GetKind()))
	})
	return sc
}

// applyScenario creates sc's objects on the plane — its LocalQueues'
// namespaces, flavors, ClusterQueues, LocalQueues, CapacityPools — and
// the nodes its Model says exist at the start, as members of their pools;
// all of it is deleted after the spec. It returns the namespaces.
func applyScenario(ctx context.Context, sc fidelityScenario) []string {
	var namespaces []string
	for _, o := range sc.objects {
		if ns := o.GetNamespace(); o.GetKind() == "LocalQueue" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	for _, ns := range namespaces {
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.CleanNamespace(ctx, ns, framework.CleanOptions{Timeout: timeout})).To(Succeed())
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}, NodeTimeout(2*timeout))
	}
	for _, o := range sc.objects {
		o := o.DeepCopy()
		Expect(env.Client.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, o)) })
	}
	for _, p := range sc.pools {
		DeferCleanup(deleteNodesOf, p.Name)
		for i := range sc.existing[p.Name] {
			addPoolNode(ctx, p, fmt.Sprintf("%s-n%d", p.Name, i))
		}
	}
	return namespaces
}

// addPoolNode creates a Ready kwok node of pool p, shaped and labelled
// like the nodes the autoscaler makes for it.
func addPoolNode(ctx context.Context, p berthv1.CapacityPool, name string) {
	gpus := p.Spec.NodeTemplate.Allocatable[controlplane.GPUResource]
	labels := map[string]string{berthv1.CapacityPoolLabel: p.Name}
	for k, v := range p.Spec.NodeTemplate.Labels {
		labels[k] = v
	}
	node := controlplane.GPUNode(name, int(gpus.Value()), labels)
	node.Status.Allocatable = p.Spec.NodeTemplate.Allocatable.DeepCopy()
	node.Status.Capacity = p.Spec.NodeTemplate.Allocatable.DeepCopy()
	Expect(env.Client.Create(ctx, node)).To(Succeed())
	Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
}

// batchJobOf is the batch Job of a trace job: its pods, requests (as
// limits too, as extended resources need), topology, LocalQueue and run
// time.
func batchJobOf(j simulatedJob) *batchv1.Job {
	job := gangJob(j.Namespace, j.ID, j.Pods, j.RunTime.Duration)
	job.Labels[berthv1.QueueNameLabel] = j.LocalQueue
	delete(job.Annotations, berthv1.TopologyRequiredAnnotation)
	switch j.Topology.Mode {
	case "Required":
		job.Annotations[berthv1.TopologyRequiredAnnotation] = j.Topology.Level
	case "Preferred":
		job.Annotations[berthv1.TopologyPreferredAnnotation] = j.Topology.Level
	}
	c := &job.Spec.Template.Spec.Containers[0]
	c.Resources.Requests = j.Requests.DeepCopy()
	c.Resources.Limits = j.Requests.DeepCopy()
	job.Spec.Template.Spec.NodeSelector = j.NodeSelector
	return job
}

// observed is when the plane first admitted a job and first had all its
// pods bound, from the start of the trace (-1: not yet).
type observed struct{ admitted, started time.Duration }

// seen is when a job's admission and start were first seen (zero: not
// yet).
type seen struct{ admitted, started time.Time }

// timeline records, from watch events as they arrive, when each job of a
// trace is first admitted (its Workload's QuotaReserved turns True) and
// first has every pod bound.
type timeline struct {
	mu    sync.Mutex
	pods  map[string]int32
	bound map[string]map[types.UID]bool
	jobs  map[string]*seen
}

// startTimeline watches the Workloads and pods of namespaces until the
// spec ends.
func startTimeline(ctx context.Context, namespaces []string, tr simulatedTrace) *timeline {
	t := &timeline{pods: map[string]int32{}, bound: map[string]map[types.UID]bool{}, jobs: map[string]*seen{}}
	for _, j := range tr.Jobs {
		t.pods[j.ID] = j.Pods
		t.bound[j.ID] = map[types.UID]bool{}
		t.jobs[j.ID] = &seen{}
	}
	byNamespace := map[string]cache.Config{}
	for _, ns := range namespaces {
		byNamespace[ns] = cache.Config{}
	}
	c, err := cache.New(env.Plane.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: byNamespace})
	Expect(err).NotTo(HaveOccurred())
	for obj, handle := range map[client.Object]func(any){&berthv1.Workload{}: t.workloadSeen, &corev1.Pod{}: t.podSeen} {
		inf, err := c.GetInformer(ctx, obj)
		Expect(err).NotTo(HaveOccurred())
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { handle(o) }, UpdateFunc: func(_, o any) { handle(o) }})
		Expect(err).NotTo(HaveOccurred())
	}
	cacheCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(cacheCtx) }()
	DeferCleanup(func() error { cancel(); return <-done })
	Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	return t
}

func (t *timeline) workloadSeen(o any) {
	wl, ok := o.(*berthv1.Workload)
	if !ok || !meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionQuotaReserved) {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ref := range wl.OwnerReferences {
		if j := t.jobs[ref.Name]; ref.Kind == "Job" && j != nil && j.admitted.IsZero() {
			j.admitted = now
		}
	}
}

func (t *timeline) podSeen(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	name := pod.Labels[batchv1.JobNameLabel]
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.jobs[name]
	if j == nil || !j.started.IsZero() {
		return
	}
	t.bound[name][pod.UID] = true
	if int32(len(t.bound[name])) == t.pods[name] {
		j.started = now
	}
}

// times returns what the timeline saw, by job, from t0.
func (t *timeline) times(t0 time.Time) map[string]observed {
	since := func(at time.Time) time.Duration {
		if at.IsZero() {
			return -1
		}
		return at.Sub(t0)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]observed{}
	for id, j := range t.jobs {
		out[id] = observed{admitted: since(j.admitted), started: since(j.started)}
	}
	return out
}

// admissionOrderGaps compares the order in which the plane admitted the
// jobs with the simulator's. Jobs the simulator admits at one instant (in
// one cycle) may be admitted in any order among themselves, since the
// controller writes one cycle's admissions side by side.
func admissionOrderGaps(want []jobTimes, got map[string]observed) []string {
	simulated := map[string]time.Duration{}
	var simOrder, planeOrder []string
	for _, w := range want {
		if w.Admitted != nil {
			simulated[w.ID] = w.Admitted.Duration
			simOrder = append(simOrder, w.ID)
		}
	}
	for id, o := range got {
		if o.admitted >= 0 {
			planeOrder = append(planeOrder, id)
		}
	}
	slices.SortStableFunc(simOrder, func(a, b string) int { return cmp.Compare(simulated[a], simulated[b]) })
	slices.SortFunc(planeOrder, func(a, b string) int { return cmp.Compare(got[a].admitted, got[b].admitted) })
	if len(simOrder) != len(planeOrder) {
		return []string{fmt.Sprintf("the simulator admitted %v, the plane %v", simOrder, planeOrder)}
	}
	var gaps []string
	for i := range simOrder {
		if p, ok := simulated[planeOrder[i]]; !ok || p != simulated[simOrder[i]] {
			gaps = append(gaps, fmt.Sprintf("admission %d: the simulator admitted %s (at %s), the plane %s", i+1, simOrder[i], simulated[simOrder[i]], planeOrder[i]))
		}
	}
	return gaps
}

// timeGaps lists the jobs whose admission or start on the plane is more
// than tolerance from the simulator's, or happened in only one of them.
func timeGaps(want []jobTimes, got map[string]observed, tolerance time.Duration) []string {
	var gaps []string
	for _, w := range want {
		o := got[w.ID]
		for _, e := range []struct {
			what  string
			sim   *metav1.Duration
			plane time.Duration
		}{{"admitted", w.Admitted, o.admitted}, {"started", w.Started, o.started}} {
			switch {
			case e.sim == nil && e.plane < 0:
			case e.sim == nil || e.plane < 0:
				gaps = append(gaps, fmt.Sprintf("%s %s: in the simulator at %v, on the plane at %v (-1: never)", w.ID, e.what, e.sim, e.plane))
			case (e.plane - e.sim.Duration).Abs() > tolerance:
				gaps = append(gaps, fmt.Sprintf("%s %s: in the simulator at %s, on the plane at %s", w.ID, e.what, e.sim.Duration, e.plane))
			}
		}
	}
	return gaps
}
