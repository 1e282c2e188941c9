package trace

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestImportColumnAliases imports the same job under the header names of
// each public trace and generic exports: each must be read, not refused.
func TestImportColumnAliases(t *testing.T) {
	tests := []struct {
		name, header string
	}{
		{name: "philly", header: "jobid,vc,submitted_time,num_gpu,run_time"},
		{name: "helios", header: "job_id,vc,submit_time,gpu_num,duration"},
		{name: "generic: timestamp, num_gpus, runtime, team", header: "id,team,timestamp,num_gpus,runtime"},
		{name: "generic: job_name, tenant, submission_time, gpus, elapsed", header: "job_name,tenant,submission_time,gpus,elapsed"},
		{name: "start_time as submit when there is no submit column", header: "job,user,start_time,gpu_count,duration"},
		{name: "upper case and spaces", header: " JOB_ID , Queue , Submit_Time , GPU , Wall_Time "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := importOne(t, tt.header+"\nj1,Team-X,100,4,600\n", ImportOptions{})
			want := Job{ID: "j1", Namespace: "team-x", LocalQueue: "default", Kind: Training, Pods: 1,
				Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}, RunTime: 10 * time.Minute}
			sameTrace(t, Trace{Jobs: []Job{got}}, Trace{Jobs: []Job{want}})
		})
	}
}

// TestImportColumnsTextListsEveryName checks the help text is the table.
func TestImportColumnsTextListsEveryName(t *testing.T) {
	text := ImportColumnsText()
	for _, c := range ImportColumns() {
		for _, n := range c.Names {
			if !strings.Contains(text, n) {
				t.Errorf("the column help does not list %q (%s)", n, c.Field)
			}
		}
	}
}

func TestImportTenantColumn(t *testing.T) {
	const in = "job_id,submit_time,gpu_num,duration,cluster_name,user\nj1,0,1,60,Prod-East,alice\n"
	tests := []struct {
		name       string
		opts       ImportOptions
		wantNS     string
		wantColumn string
	}{
		{name: "the first known tenant name", wantNS: "alice", wantColumn: "user"},
		{name: "--tenant-column picks another", opts: ImportOptions{TenantColumn: "Cluster_Name"}, wantNS: "prod-east", wantColumn: "cluster_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, stats, err := Import(strings.NewReader(in), tt.opts)
			wantErr(t, err)
			if tr.Jobs[0].Namespace != tt.wantNS || stats.TenantColumn != tt.wantColumn {
				t.Errorf("namespace %q from column %q, want %q from %q", tr.Jobs[0].Namespace, stats.TenantColumn, tt.wantNS, tt.wantColumn)
			}
		})
	}
	_, stats, err := Import(strings.NewReader("job_id,submit_time,gpu_num,duration\nj1,0,1,60\n"), ImportOptions{})
	wantErr(t, err)
	if stats.TenantColumn != "" {
		t.Errorf("no tenant column, but stats name %q", stats.TenantColumn)
	}
}

func TestImportGPUUnit(t *testing.T) {
	tests := []struct {
		name     string
		header   string
		unit     GPUUnit
		cell     string
		wantGPUs int64
		wantUnit GPUUnit
	}{
		{name: "plan_gpu 50 is half a GPU, rounded up to one", header: "plan_gpu", cell: "50", wantGPUs: 1, wantUnit: GPUUnitPercent},
		{name: "plan_gpu 250 is three GPUs", header: "plan_gpu", cell: "250", wantGPUs: 3, wantUnit: GPUUnitPercent},
		{name: "plan_gpu 800 is eight GPUs", header: "plan_gpu", cell: "800", wantGPUs: 8, wantUnit: GPUUnitPercent},
		{name: "gpus stay GPUs", header: "gpus", cell: "3", wantGPUs: 3, wantUnit: GPUUnitGPUs},
		{name: "percent asked for any column", header: "gpus", unit: GPUUnitPercent, cell: "300", wantGPUs: 3, wantUnit: GPUUnitPercent},
		{name: "plan_gpu read as GPUs when asked", header: "plan_gpu", unit: GPUUnitGPUs, cell: "2", wantGPUs: 2, wantUnit: GPUUnitGPUs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fmt.Sprintf("job_id,submit_time,duration,%s\nj1,0,60,%s\n", tt.header, tt.cell)
			tr, stats, err := Import(strings.NewReader(in), ImportOptions{GPUUnit: tt.unit})
			wantErr(t, err)
			q := tr.Jobs[0].Requests["nvidia.com/gpu"]
			if got := q.Value() * int64(tr.Jobs[0].Pods); got != tt.wantGPUs || stats.GPUUnit != tt.wantUnit {
				t.Errorf("%d GPUs read as %q, want %d as %q", got, stats.GPUUnit, tt.wantGPUs, tt.wantUnit)
			}
		})
	}
}

// TestImportCaps checks that oversized rows and traces are refused at
// import, with the cap and a way out in the message.
func TestImportCaps(t *testing.T) {
	const hdr = "job_id,submit_time,gpu_num,duration\n"
	tests := []struct {
		name string
		in   string
		opts ImportOptions
		want []string
	}{
		{name: "a job of 2,000,000,000 GPUs", in: hdr + "ok,0,1,60\nhuge,0,2000000000,60\n",
			want: []string{"line 3 (job huge)", "250000000 pods", "(100000)", "--gpus-per-node"}},
		{name: "a job just over the pod cap", in: hdr + "big,0,800008,60\n",
			want: []string{"100001 pods", "more than the simulator takes for one job (100000)"}},
		{name: "too many jobs", in: hdr + "a,0,1,60\nb,0,1,60\nc,0,1,60\n", opts: ImportOptions{maxJobs: 2},
			want: []string{"line 4 (job c)", "more than 2 jobs", "--limit", "split the file"}},
		{name: "too many pods in all", in: hdr + "a,0,16,60\nb,0,16,60\n", opts: ImportOptions{maxPods: 3},
			want: []string{"line 3 (job b)", "4 pods", "(3 in all)", "split the file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Import(strings.NewReader(tt.in), tt.opts)
			wantErr(t, err, tt.want...)
		})
	}
	// Under the caps, the same rows import.
	_, _, err := Import(strings.NewReader(hdr+"a,0,16,60\nb,0,8,60\n"), ImportOptions{maxJobs: 2, maxPods: 3})
	wantErr(t, err)
}
