package trace

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func csvOf(t *testing.T, tr Trace) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, tr); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func mustGenerate(t *testing.T, m Mix, seed uint64) Trace {
	t.Helper()
	tr, err := Generate(m, seed)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestGenerateIsDeterministic(t *testing.T) {
	m := validMix()
	tests := []struct {
		name       string
		a, b       uint64
		wantSameAs bool
	}{
		{name: "same seed", a: 7, b: 7, wantSameAs: true},
		{name: "other seed", a: 7, b: 8, wantSameAs: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := csvOf(t, mustGenerate(t, m, tt.a)), csvOf(t, mustGenerate(t, m, tt.b))
			if (a == b) != tt.wantSameAs {
				t.Errorf("seeds %d and %d: same trace = %v, want %v", tt.a, tt.b, a == b, tt.wantSameAs)
			}
		})
	}
}

// TestGenerateGolden pins the trace of the example mix, so that a change
// to the generator's draws is seen in review rather than silently
// changing every simulation's input.
func TestGenerateGolden(t *testing.T) {
	f, err := os.Open("testdata/mix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadMix(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := mustGenerate(t, m, 42)
	golden(t, "mix-seed42.csv", csvOf(t, tr))

	// The chat service: 120 req/s on 50 req/s replicas is 3 all day; the
	// burst to 400 req/s needs 8, so 5 more are submitted during its
	// rise and retired during its fall.
	var base, burst int
	for _, j := range tr.Jobs {
		switch {
		case j.Class != "chat":
		case j.Submit == 0 && j.RunTime == 24*time.Hour:
			base++
		case j.Submit > 11*time.Hour+30*time.Minute && j.Submit+j.RunTime <= 13*time.Hour+30*time.Minute:
			burst++
		default:
			t.Errorf("unexpected chat replica %s submitted at %v running %v", j.ID, j.Submit, j.RunTime)
		}
	}
	if base != 3 || burst != 5 {
		t.Errorf("chat replicas: %d all day and %d for the burst, want 3 and 5", base, burst)
	}
}

func TestGenerateTraining(t *testing.T) {
	m := Mix{
		Duration: Duration{200 * time.Hour},
		Tenants: []Tenant{
			{Namespace: "a", LocalQueue: "qa", Weight: 3},
			{Namespace: "b", LocalQueue: "qb", Weight: 1},
		},
		Training: TrainingMix{
			Arrival: Arrival{RatePerHour: 60},
			Classes: []TrainingClass{
				{
					Name: "small", Share: 1, Pods: []Choice{{Value: 1, Weight: 1}, {Value: 2, Weight: 1}}, GPUsPerPod: 8,
					CPUPerPod: resource.MustParse("32"), MemoryPerPod: resource.MustParse("256Gi"),
					RunTime: LogNormal{Median: Duration{time.Hour}, Sigma: 1, Min: Duration{10 * time.Minute}, Max: Duration{4 * time.Hour}},
				},
				{
					Name: "large", Share: 1, Pods: []Choice{{Value: 16, Weight: 1}}, GPUsPerPod: 8, Priority: 5,
					RunTime:      LogNormal{Median: Duration{10 * time.Hour}},
					Topology:     Topology{Mode: Required, Level: "rack"},
					NodeSelector: map[string]string{"gpu": "h100"},
				},
			},
		},
	}
	tr := mustGenerate(t, m, 1)
	wantErr(t, tr.Validate())
	byClass := map[string][]Job{}
	byTenant := map[string]int{}
	for i, j := range tr.Jobs {
		byClass[j.Class] = append(byClass[j.Class], j)
		byTenant[j.Namespace+"/"+j.LocalQueue]++
		if j.Kind != Training || j.Submit < 0 || j.Submit >= m.Duration.Duration || j.Submit%time.Second != 0 {
			t.Fatalf("job %s: kind %s submitted at %v", j.ID, j.Kind, j.Submit)
		}
		if i > 0 && j.Submit < tr.Jobs[i-1].Submit {
			t.Fatalf("jobs not sorted at %s", j.ID)
		}
	}
	// 12000 jobs expected; ±5% is about five standard deviations.
	within(t, "jobs", float64(len(tr.Jobs)), 12000, 0.05)
	within(t, "small share", float64(len(byClass["small"])), 6000, 0.06)
	within(t, "tenant a share", float64(byTenant["a/qa"]), 9000, 0.05)
	within(t, "tenant b share", float64(byTenant["b/qb"]), 3000, 0.08)

	checkSmall(t, byClass["small"])
	for _, j := range byClass["large"] {
		if j.Pods != 16 || j.RunTime != 10*time.Hour || j.Priority != 5 || j.Topology.Level != "rack" || j.NodeSelector["gpu"] != "h100" {
			t.Fatalf("large job %+v does not follow its class", j)
		}
		if _, ok := j.Requests[corev1.ResourceCPU]; ok {
			t.Fatalf("large job %s requests CPU its class does not", j.ID)
		}
	}
	ids := make([]string, 0, len(byClass["large"]))
	for _, j := range byClass["large"] {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	if ids[0] != "large-00001" || ids[len(ids)-1] != fmt.Sprintf("large-%05d", len(ids)) {
		t.Errorf("large IDs run %s to %s for %d jobs", ids[0], ids[len(ids)-1], len(ids))
	}
}

// checkSmall checks the small class's jobs follow its distributions.
func checkSmall(t *testing.T, jobs []Job) {
	t.Helper()
	var runTimes []time.Duration
	pods := map[int32]int{}
	for _, j := range jobs {
		pods[j.Pods]++
		runTimes = append(runTimes, j.RunTime)
		gpu, cpu, mem := j.Requests["nvidia.com/gpu"], j.Requests[corev1.ResourceCPU], j.Requests[corev1.ResourceMemory]
		if gpu.Value() != 8 || cpu.Value() != 32 || mem.String() != "256Gi" {
			t.Fatalf("small job %s requests %v", j.ID, j.Requests)
		}
		if j.RunTime < 10*time.Minute || j.RunTime > 4*time.Hour || j.RunTime%time.Second != 0 {
			t.Fatalf("small job %s runs %v, outside [10m, 4h] or not whole seconds", j.ID, j.RunTime)
		}
	}
	if len(pods) != 2 || pods[1] == 0 || pods[2] == 0 {
		t.Errorf("small pods drawn %v, want only 1 and 2", pods)
	}
	within(t, "small pods=1", float64(pods[1]), float64(len(jobs))/2, 0.08)
	slices.Sort(runTimes)
	within(t, "small median run time (h)", runTimes[len(runTimes)/2].Hours(), 1, 0.08)
	if runTimes[0] != 10*time.Minute || runTimes[len(runTimes)-1] != 4*time.Hour {
		t.Errorf("sigma 1 should reach both clamps; run times span %v to %v", runTimes[0], runTimes[len(runTimes)-1])
	}
}

func within(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if math.Abs(got-want) > tolerance*want {
		t.Errorf("%s = %v, want %v ± %.0f%%", what, got, want, tolerance*100)
	}
}

func TestGenerateDiurnal(t *testing.T) {
	tests := []struct {
		name              string
		amplitude         float64
		minRatio, maxRate float64 // bounds on peak-hours / trough-hours arrivals
	}{
		{name: "constant", amplitude: 0, minRatio: 0.9, maxRate: 1.1},
		// cos averaged over ±2h of the peak is 0.83: (1+0.75)/(1-0.75) ≈ 11.
		{name: "strong", amplitude: 0.9, minRatio: 8, maxRate: 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMix()
			m.Inference = nil
			m.Duration = Duration{30 * 24 * time.Hour}
			m.Training.Arrival = Arrival{RatePerHour: 100, DiurnalAmplitude: tt.amplitude, PeakAt: Duration{6 * time.Hour}}
			var peak, trough float64
			for _, j := range mustGenerate(t, m, 3).Jobs {
				switch h := j.Submit % (24 * time.Hour); {
				case h >= 4*time.Hour && h < 8*time.Hour:
					peak++
				case h >= 16*time.Hour && h < 20*time.Hour:
					trough++
				}
			}
			if r := peak / trough; r < tt.minRatio || r > tt.maxRate {
				t.Errorf("peak/trough arrivals = %.0f/%.0f = %.2f, want in [%v, %v]", peak, trough, r, tt.minRatio, tt.maxRate)
			}
		})
	}
}

func TestGenerateInference(t *testing.T) {
	zero := Duration{0}
	tests := []struct {
		name     string
		rate     RateCurve
		capacity float64
		want     []string // id submit runTime
	}{
		{
			// 10 req/s all hour (1 replica); 30 from 10m to 30m (3); 20
			// from 30m to 40m (2): the newest replica is retired first.
			name: "overlapping steps retire last in first out",
			rate: RateCurve{Base: 10, Bursts: []Burst{
				{At: Duration{10 * time.Minute}, Hold: Duration{20 * time.Minute}, Fall: &zero, Peak: 30},
				{At: Duration{10 * time.Minute}, Hold: Duration{30 * time.Minute}, Fall: &zero, Peak: 20},
			}},
			capacity: 10,
			want:     []string{"svc-00001 0s 1h0m0s", "svc-00002 10m0s 30m0s", "svc-00003 10m0s 20m0s"},
		},
		{
			// A rise from 0 to 60 req/s over the hour, sampled every 15m
			// on 15 req/s replicas, needs one more replica each step, all
			// running to the end.
			name:     "linear rise",
			rate:     RateCurve{Bursts: []Burst{{Rise: Duration{time.Hour}, Peak: 60}}, Step: Duration{15 * time.Minute}},
			capacity: 15,
			want:     []string{"svc-00001 15m0s 45m0s", "svc-00002 30m0s 30m0s", "svc-00003 45m0s 15m0s"},
		},
		{name: "no traffic, no replicas", rate: RateCurve{}, capacity: 10, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Mix{Duration: Duration{time.Hour}, Inference: []Service{{
				Name: "svc", Namespace: "serving", LocalQueue: "inf", PodsPerReplica: 2, GPUsPerPod: 4,
				CapacityPerReplica: tt.capacity, SLO: Duration{time.Minute}, Priority: 7, Rate: tt.rate,
			}}}
			tr := mustGenerate(t, m, 0)
			var got []string
			for _, j := range tr.Jobs {
				got = append(got, fmt.Sprintf("%s %v %v", j.ID, j.Submit, j.RunTime))
				gpu := j.Requests["nvidia.com/gpu"]
				if j.Kind != Inference || j.Pods != 2 || gpu.Value() != 4 || j.SLO != time.Minute || j.Priority != 7 || j.Class != "svc" {
					t.Errorf("replica %s does not follow its service: %+v", j.ID, j)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("replicas:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestRateCurveAt(t *testing.T) {
	mins := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	slow := Duration{mins(20)}
	curve := RateCurve{Base: 10, Bursts: []Burst{
		// Rises 10→50 over 10m from 10m, holds to 30m, falls (as it rose) by 40m.
		{At: Duration{mins(10)}, Rise: Duration{mins(10)}, Hold: Duration{mins(10)}, Peak: 50},
		// Overlaps the first with a lower peak and a slower fall.
		{At: Duration{mins(30)}, Hold: Duration{mins(10)}, Fall: &slow, Peak: 30},
	}}
	tests := []struct {
		at   time.Duration
		want float64
	}{
		{at: 0, want: 10}, {at: mins(10), want: 10}, {at: mins(15), want: 30}, {at: mins(20), want: 50},
		{at: mins(29), want: 50}, {at: mins(35), want: 30}, {at: mins(40), want: 30}, {at: mins(50), want: 20},
		{at: mins(60), want: 10}, {at: mins(90), want: 10},
	}
	for _, tt := range tests {
		if got := curve.at(tt.at); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("rate at %v = %v, want %v", tt.at, got, tt.want)
		}
	}
}

func TestLogNormalSample(t *testing.T) {
	tests := []struct {
		name     string
		l        LogNormal
		min, max time.Duration
	}{
		{name: "no spread is the median", l: LogNormal{Median: Duration{90 * time.Minute}}, min: 90 * time.Minute, max: 90 * time.Minute},
		{name: "clamped to max", l: LogNormal{Median: Duration{10 * time.Hour}, Max: Duration{time.Hour}}, min: time.Hour, max: time.Hour},
		{name: "clamped to min", l: LogNormal{Median: Duration{time.Second}, Min: Duration{time.Minute}}, min: time.Minute, max: time.Minute},
		{name: "at least a second", l: LogNormal{Median: Duration{time.Millisecond}}, min: time.Second, max: time.Second},
		{name: "rounded to the second", l: LogNormal{Median: Duration{1500 * time.Millisecond}, Max: Duration{1600 * time.Millisecond}}, min: 2 * time.Second, max: 2 * time.Second},
		{name: "wide spread without max stays finite", l: LogNormal{Median: Duration{time.Hour}, Sigma: 50}, min: time.Second, max: maxSampledRunTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for range 200 {
				if d := tt.l.sample(rng); d < tt.min || d > tt.max {
					t.Fatalf("sample %v outside [%v, %v]", d, tt.min, tt.max)
				}
			}
		})
	}
}

func TestGenerateRejectsInvalidMix(t *testing.T) {
	m := validMix()
	m.Tenants = nil
	_, err := Generate(m, 1)
	wantErr(t, err, "invalid mix", "tenants must list at least one tenant")
}
