package trace

import (
	"bytes"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestImportHeliosGolden(t *testing.T) {
	f, err := os.Open("testdata/helios_sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, stats, err := Import(f, ImportOptions{
		CPUPerGPU:     resource.MustParse("6"),
		MemoryPerGPU:  resource.MustParse("64Gi"),
		LocalQueue:    "gpu",
		TopologyLevel: "topology.kubernetes.io/rack",
		MinDuration:   10 * time.Second,
	})
	wantErr(t, err)
	var buf bytes.Buffer
	wantErr(t, WriteYAML(&buf, tr))
	golden(t, "helios_sample.yaml", buf.String())
	back, err := ReadYAML(&buf)
	wantErr(t, err)
	sameTrace(t, back, tr)

	wantSkipped := map[string]int{
		skipZeroGPUs: 1, skipShort: 1, skipNonPositive: 1, skipBadDuration: 1, skipBadSubmit: 1,
		skipDuplicateID: 1, skipBadGPUs: 1, skipShortRow: 1,
	}
	if stats.Read != 21 || stats.Imported != 13 || !maps.Equal(stats.Skipped, wantSkipped) {
		t.Errorf("stats = %+v, want 21 read, 13 imported, skipped %v", stats, wantSkipped)
	}
	// The earliest submission (h-0013, logged out of order) is time zero.
	if first := tr.Jobs[0]; first.ID != "h-0013" || first.Submit != 0 {
		t.Errorf("first job %s at %v, want h-0013 at 0s", first.ID, first.Submit)
	}
}

// importOne imports a CSV and returns its only job.
func importOne(t *testing.T, in string, opts ImportOptions) Job {
	t.Helper()
	tr, stats, err := Import(strings.NewReader(in), opts)
	wantErr(t, err)
	if len(tr.Jobs) != 1 {
		t.Fatalf("imported %d jobs, want 1; stats %+v", len(tr.Jobs), stats)
	}
	return tr.Jobs[0]
}

func TestImportLayouts(t *testing.T) {
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	}
	tests := []struct {
		name string
		in   string
		opts ImportOptions
		want Job
	}{
		{
			name: "philly: datetimes, duration from start and end",
			in:   "JobID,VC,User,Submitted_Time,Num_GPU,Start_Time,End_Time\napp_1,6214e9,u1,2017-10-03 02:14:44,4,2017-10-03 02:15:00,2017-10-03 03:15:30\n",
			want: Job{ID: "app_1", Namespace: "6214e9", LocalQueue: "default", Kind: Training, Pods: 1, Requests: gpus(4), RunTime: time.Hour + 30*time.Second},
		},
		{
			name: "pai: plan_gpu is percent without asking, rounds up, unix floats",
			in:   "job_name,user,plan_gpu,start_time,end_time,submit_time\nj-a,User.One,50,1000.5,1600.5,990\n",
			want: Job{ID: "j-a", Namespace: "user-one", LocalQueue: "default", Kind: Training, Pods: 1, Requests: gpus(1), RunTime: 10 * time.Minute},
		},
		{
			name: "helios: vc preferred over user, fractional seconds",
			in:   "job_id,user,vc,gpu_num,submit_time,duration\nh1,u1,vcEwI,8,1586000000,90.5\n",
			want: Job{ID: "h1", Namespace: "vcewi", LocalQueue: "default", Kind: Training, Pods: 1, Requests: gpus(8), RunTime: 90500 * time.Millisecond},
		},
		{
			name: "multi-node job on whole nodes, with topology and per-GPU requests",
			in:   "id,submit,gpus,runtime,group\nbig,0,20,3600,Research Lab\n",
			opts: ImportOptions{GPUsPerNode: 4, GPUResource: "amd.com/gpu", CPUPerGPU: resource.MustParse("500m"), MemoryPerGPU: resource.MustParse("16Gi"),
				LocalQueue: "batch", TopologyLevel: "rack"},
			want: Job{ID: "big", Namespace: "research-lab", LocalQueue: "batch", Kind: Training, Pods: 5, RunTime: time.Hour,
				Requests: corev1.ResourceList{"amd.com/gpu": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("64Gi")},
				Topology: Topology{Mode: Required, Level: "rack"}},
		},
		{
			name: "uneven GPUs round up to whole nodes",
			in:   "id,submit,gpus,elapsed\nodd,0,12,60\n",
			want: Job{ID: "odd", Namespace: "default", LocalQueue: "default", Kind: Training, Pods: 2, Requests: gpus(8), RunTime: time.Minute},
		},
		{
			name: "custom namespace, empty duration falls back to start and end",
			in:   "job_id,virtual_cluster,gpu_request,start_date,duration,start_time,end_time\nx,vc1,2,2020-01-01 00:00:00,,2020-01-01 01:00:00,2020-01-01 03:00:00\n",
			opts: ImportOptions{Namespace: func(tenant string) string { return "berth-" + TenantNamespace(tenant) }},
			want: Job{ID: "x", Namespace: "berth-vc1", LocalQueue: "default", Kind: Training, Pods: 1, Requests: gpus(2), RunTime: 2 * time.Hour},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := importOne(t, tt.in, tt.opts)
			sameTrace(t, Trace{Jobs: []Job{got}}, Trace{Jobs: []Job{tt.want}})
		})
	}
}

func TestImportSkips(t *testing.T) {
	const hdr = "job_id,vc,gpu_num,submit_time,duration\n"
	tests := []struct {
		name string
		rows string
		opts ImportOptions
		want map[string]int
	}{
		{name: "zero GPUs", rows: "a,v,0,0,60\n", want: map[string]int{skipZeroGPUs: 1}},
		{name: "bad GPUs", rows: "a,v,-1,0,60\nb,v,lots,0,60\nc,v,+Inf,0,60\n", want: map[string]int{skipBadGPUs: 3}},
		{name: "bad submit", rows: "a,v,1,yesterday,60\nb,v,1,,60\n", want: map[string]int{skipBadSubmit: 2}},
		{name: "bad duration", rows: "a,v,1,0,None\n", want: map[string]int{skipBadDuration: 1}},
		{name: "non-positive duration", rows: "a,v,1,0,0\nb,v,1,0,-5\n", want: map[string]int{skipNonPositive: 2}},
		{name: "below MinDuration", rows: "a,v,1,0,59\n", opts: ImportOptions{MinDuration: time.Minute}, want: map[string]int{skipShort: 1}},
		{name: "missing id", rows: ",v,1,0,60\n", want: map[string]int{skipNoID: 1}},
		{name: "short row", rows: "a,v\n", want: map[string]int{skipShortRow: 1}},
		{name: "duplicate id keeps the first", rows: "ok,v,1,5,60\n", want: map[string]int{skipDuplicateID: 1}},
		{name: "invalid namespace", rows: "a,bad,1,0,60\n", opts: ImportOptions{Namespace: func(tenant string) string {
			if tenant == "bad" {
				return "Not_A_Label"
			}
			return tenant
		}},
			want: map[string]int{skipNamespace: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A good row first, so that skipping never empties the trace.
			tr, stats, err := Import(strings.NewReader(hdr+"ok,v,1,0,60\n"+tt.rows), tt.opts)
			wantErr(t, err)
			if !maps.Equal(stats.Skipped, tt.want) {
				t.Errorf("skipped %v, want %v", stats.Skipped, tt.want)
			}
			if len(tr.Jobs) != 1 || tr.Jobs[0].ID != "ok" || stats.Imported != 1 {
				t.Errorf("imported %d jobs (stats %+v), want only ok", len(tr.Jobs), stats)
			}
		})
	}
}

func TestImportLimit(t *testing.T) {
	in := "job_id,gpu_num,submit_time,duration\na,1,30,60\nb,0,20,60\nc,1,10,60\nd,1,0,60\n"
	tr, stats, err := Import(strings.NewReader(in), ImportOptions{Limit: 2})
	wantErr(t, err)
	// The limit counts imported jobs in file order; b is skipped, d never read.
	if stats.Read != 3 || stats.Imported != 2 || stats.Skipped[skipZeroGPUs] != 1 {
		t.Errorf("stats = %+v, want 3 read, 2 imported, 1 skipped", stats)
	}
	if len(tr.Jobs) != 2 || tr.Jobs[0].ID != "c" || tr.Jobs[0].Submit != 0 || tr.Jobs[1].ID != "a" || tr.Jobs[1].Submit != 20*time.Second {
		t.Errorf("jobs %+v, want c at 0s then a at 20s", tr.Jobs)
	}
}

func TestImportErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		opts ImportOptions
		want []string
	}{
		{name: "empty input", in: "", want: []string{"the input is empty"}},
		{name: "missing columns", in: "label,when,cards\n", want: []string{
			"no job id column; name it one of job_id, jobid, job_name",
			"no submit time column; name it one of submit_time, submitted_time",
			"no GPUs column; name it one of gpu_num, num_gpu, num_gpus",
			"no duration column; name it one of duration, run_time, runtime",
		}},
		{name: "tenant column not in the header", in: "job_id,submit_time,gpu_num,duration,vc\n", opts: ImportOptions{TenantColumn: "team_name"},
			want: []string{`no tenant column "team_name" (--tenant-column); the header has job_id, submit_time, gpu_num, duration, vc`}},
		{name: "start without end is no duration", in: "job_id,submit_time,gpu_num,start_time\n", want: []string{"no duration column"}},
		{name: "malformed CSV", in: "job_id,submit_time,gpu_num,duration\n\"a,0,1,60\n", want: []string{"importing trace", "extraneous or missing \" in quoted-field"}},
		{name: "bad options", in: "job_id,submit_time,gpu_num,duration\n",
			opts: ImportOptions{GPUsPerNode: -1, CPUPerGPU: resource.MustParse("-1"), MemoryPerGPU: resource.MustParse("-1Gi"), MinDuration: -1, Limit: -1},
			want: []string{"GPUsPerNode must not be negative", "CPUPerGPU must not be negative", "MemoryPerGPU must not be negative",
				"MinDuration must not be negative", "the import limit must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Import(strings.NewReader(tt.in), tt.opts)
			wantErr(t, err, tt.want...)
		})
	}
}

func TestTenantNamespace(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "vcEwI", want: "vcewi"},
		{in: "vc_Mix-01", want: "vc-mix-01"},
		{in: "  Research  Lab!! ", want: "research-lab"},
		{in: "--x--", want: "x"},
		{in: "", want: "default"},
		{in: "___", want: "default"},
		{in: "équipe", want: "quipe"},
		{in: strings.Repeat("a", 62) + "_b", want: strings.Repeat("a", 62)},
		{in: strings.Repeat("ab", 40), want: strings.Repeat("ab", 31) + "a"},
	}
	for _, tt := range tests {
		if got := TenantNamespace(tt.in); got != tt.want {
			t.Errorf("TenantNamespace(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestGangShape(t *testing.T) {
	tests := []struct{ gpus, perNode, pods, perPod int64 }{
		{gpus: 1, perNode: 8, pods: 1, perPod: 1},
		{gpus: 8, perNode: 8, pods: 1, perPod: 8},
		{gpus: 9, perNode: 8, pods: 2, perPod: 8},
		{gpus: 16, perNode: 8, pods: 2, perPod: 8},
		{gpus: 33, perNode: 8, pods: 5, perPod: 8},
	}
	for _, tt := range tests {
		if pods, perPod := gangShape(tt.gpus, tt.perNode); pods != tt.pods || perPod != tt.perPod {
			t.Errorf("gangShape(%d, %d) = %d × %d, want %d × %d", tt.gpus, tt.perNode, pods, perPod, tt.pods, tt.perPod)
		}
	}
}
