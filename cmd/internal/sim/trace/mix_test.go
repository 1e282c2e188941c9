package trace

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// validMix is a small mix that passes validation, for tests to break one
// field of.
func validMix() Mix {
	fall := Duration{0}
	return Mix{
		Duration: Duration{24 * time.Hour},
		Tenants:  []Tenant{{Namespace: "team-a", LocalQueue: "gpu", Weight: 1}},
		Training: TrainingMix{
			Arrival: Arrival{RatePerHour: 10},
			Classes: []TrainingClass{{
				Name: "small", Share: 1, Pods: []Choice{{Value: 1, Weight: 1}}, GPUsPerPod: 8,
				RunTime: LogNormal{Median: Duration{time.Hour}, Sigma: 1},
			}},
		},
		Inference: []Service{{
			Name: "chat", Namespace: "serving", LocalQueue: "inference", PodsPerReplica: 1, GPUsPerPod: 1,
			CapacityPerReplica: 10, Rate: RateCurve{Base: 10, Bursts: []Burst{{At: Duration{time.Hour}, Hold: Duration{time.Hour}, Peak: 30, Fall: &fall}}},
		}},
	}
}

func TestMixValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Mix)
		want   []string
	}{
		{name: "valid", change: func(*Mix) {}},
		{name: "inference only needs no tenants", change: func(m *Mix) { m.Tenants, m.Training = nil, TrainingMix{} }},
		{name: "no duration", change: func(m *Mix) { m.Duration = Duration{} }, want: []string{"duration must be positive, got 0s"}},
		{name: "nothing to generate", change: func(m *Mix) { m.Training, m.Inference = TrainingMix{}, nil },
			want: []string{"no training classes and no inference services"}},
		{name: "training without tenants", change: func(m *Mix) { m.Tenants = nil }, want: []string{"tenants must list at least one tenant"}},
		{name: "bad tenant", change: func(m *Mix) { m.Tenants[0] = Tenant{Weight: math.NaN()} },
			want: []string{"tenants[0].namespace must not be empty", "tenants[0].localQueue must not be empty", "tenants[0].weight must be positive, got NaN"}},
		{name: "no arrival rate", change: func(m *Mix) { m.Training.Arrival.RatePerHour = 0 },
			want: []string{"training.arrival.ratePerHour must be positive, got 0"}},
		{name: "too many jobs", change: func(m *Mix) { m.Training.Arrival.RatePerHour = 1e6 },
			want: []string{"gives about 24000000 jobs; at most 1000000"}},
		{name: "amplitude above 1", change: func(m *Mix) { m.Training.Arrival.DiurnalAmplitude = 1.5 },
			want: []string{"training.arrival.diurnalAmplitude must be in [0, 1], got 1.5"}},
		{name: "peak past a day", change: func(m *Mix) { m.Training.Arrival.PeakAt = Duration{25 * time.Hour} },
			want: []string{"training.arrival.peakAt must be in [0, 24h), got 25h0m0s"}},
		{name: "bad class", change: func(m *Mix) {
			m.Training.Classes[0] = TrainingClass{Pods: []Choice{{Value: 0, Weight: -1}}, GPUsPerPod: -1,
				RunTime: LogNormal{Sigma: -1, Min: Duration{time.Hour}, Max: Duration{time.Minute}}, Topology: Topology{Level: "rack"}}
		}, want: []string{
			"training.classes[0].name must not be empty", "training.classes[0].share must be positive, got 0",
			"training.classes[0].pods[0].value must be 1 to 100000, got 0", "training.classes[0].pods[0].weight must be positive, got -1",
			"training.classes[0].gpusPerPod must not be negative, got -1", "training.classes[0].runTime.median must be positive",
			"training.classes[0].runTime.sigma must be a finite number ≥ 0, got -1",
			"training.classes[0].runTime.max must be 0 (no limit) or at least min 1h0m0s, got 1m0s",
			"training.classes[0]: topology mode and level must both be set",
		}},
		{name: "no pods choices", change: func(m *Mix) { m.Training.Classes[0].Pods = nil },
			want: []string{"training.classes[0].pods must list at least one choice"}},
		{name: "class requests nothing", change: func(m *Mix) { m.Training.Classes[0].GPUsPerPod = 0 },
			want: []string{"training.classes[0] must request something"}},
		{name: "negative memory", change: func(m *Mix) { m.Training.Classes[0].MemoryPerPod = resource.MustParse("-1Gi") },
			want: []string{"training.classes[0].memoryPerPod must not be negative, got -1Gi"}},
		{name: "duplicate names", change: func(m *Mix) { m.Inference[0].Name = "small" },
			want: []string{`inference[0].name "small" is already used by training.classes[0]`}},
		{name: "bad service", change: func(m *Mix) {
			m.Inference[0] = Service{PodsPerReplica: 5, GPUsPerPod: 1, SLO: Duration{-time.Second}, Rate: RateCurve{Base: -1, Step: Duration{-time.Minute}}}
		}, want: []string{
			"inference[0].name must not be empty", "inference[0].namespace must not be empty", "inference[0].localQueue must not be empty",
			"inference[0].podsPerReplica must be 1 to 4, got 5", "inference[0].capacityPerReplica must be positive",
			"inference[0].slo must not be negative", "inference[0].rate.base must be a finite number ≥ 0", "inference[0].rate.step must be positive, got -1m0s",
		}},
		{name: "bad burst", change: func(m *Mix) {
			fall := Duration{-time.Second}
			m.Inference[0].Rate.Bursts = []Burst{{At: Duration{-time.Second}, Rise: Duration{-time.Second}, Hold: Duration{-time.Second}, Fall: &fall, Peak: 5}}
		}, want: []string{
			"inference[0].rate.bursts[0].at must not be negative", "inference[0].rate.bursts[0].rise must not be negative",
			"inference[0].rate.bursts[0].hold must not be negative", "inference[0].rate.bursts[0].fall must not be negative, got -1s",
			"inference[0].rate.bursts[0].peak must be a finite rate at least the base 10, got 5",
		}},
		{name: "tiny step", change: func(m *Mix) { m.Inference[0].Rate.Step = Duration{time.Millisecond} },
			want: []string{"inference[0].rate.step 1ms over 24h0m0s gives 86400000 steps; at most 1000000"}},
		{name: "too many replicas", change: func(m *Mix) { m.Inference[0].CapacityPerReplica = 1e-6 },
			want: []string{"inference[0] needs 30000000 replicas at its peak rate 30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMix()
			tt.change(&m)
			wantErr(t, m.Validate(), tt.want...)
		})
	}
}

func TestReadMix(t *testing.T) {
	f, err := os.Open("testdata/mix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadMix(f)
	wantErr(t, err)
	checks := []struct {
		what      string
		got, want any
	}{
		{"duration", m.Duration.Duration, 24 * time.Hour},
		{"peakAt", m.Training.Arrival.PeakAt.Duration, 14 * time.Hour},
		{"tenants", len(m.Tenants), 2},
		{"classes", len(m.Training.Classes), 2},
		{"large topology", m.Training.Classes[1].Topology, Topology{Mode: Required, Level: "topology.kubernetes.io/rack"}},
		{"small max run time", m.Training.Classes[0].RunTime.Max.Duration, 6 * time.Hour},
		{"small memory", m.Training.Classes[0].MemoryPerPod.String(), "256Gi"},
		{"chat slo", m.Inference[0].SLO.Duration, 2 * time.Minute},
		{"chat step", m.Inference[0].Rate.Step.Duration, 5 * time.Minute},
		{"burst at", m.Inference[0].Rate.Bursts[0].At.Duration, 11*time.Hour + 30*time.Minute},
		{"burst fall unset", m.Inference[0].Rate.Bursts[0].Fall == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestMixYAMLRoundTrip(t *testing.T) {
	m := validMix()
	m.Training.Classes[0].CPUPerPod = resource.MustParse("32")
	m.Inference[0].SLO = Duration{90 * time.Second}
	data, err := yaml.Marshal(m)
	wantErr(t, err)
	for _, want := range []string{"duration: 24h0m0s", "median: 1h0m0s", "slo: 1m30s", "fall: 0s", `cpuPerPod: "32"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("YAML lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "memoryPerPod") {
		t.Errorf("zero memory written:\n%s", data)
	}
	back, err := ReadMix(bytes.NewReader(data))
	wantErr(t, err)
	if !equality.Semantic.DeepEqual(back, m) {
		t.Errorf("mix changed in a round trip:\n%s", data)
	}
}

func TestReadMixErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "unknown field", in: "duration: 1h\ninference: [{name: a, capacity: 5}]\n", want: []string{"reading mix", `unknown field "capacity"`}},
		{name: "bad duration", in: "duration: one hour\n", want: []string{`invalid duration "one hour"`}},
		{name: "wrong type", in: "duration: 1h\ntenants: [{weight: heavy}]\n", want: []string{"tenants.weight: cannot read a string as float64"}},
		{name: "invalid mix", in: "duration: 1h\n", want: []string{"reading mix", "no training classes and no inference services"}},
		{name: "seconds are durations too", in: "duration: 3600\ninference: [{name: a, namespace: n, localQueue: q, podsPerReplica: 1, gpusPerPod: 1, capacityPerReplica: 1, rate: {base: 1, step: 0}}]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadMix(strings.NewReader(tt.in))
			wantErr(t, err, tt.want...)
		})
	}
}
