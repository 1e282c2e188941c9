package trace

import (
	"fmt"
	"strings"
)

// ImportColumn is one field Import reads and the header names it is
// known by in public traces. ImportColumns is the one table of them: the
// importer, `kubectl berth simulate --help` and docs/cli.md all come from
// it, so that what is documented is what is read.
type ImportColumn struct {
	// Field is what the column holds, as error messages name it.
	Field string
	// Names are the accepted header names, lowercase, in order of
	// preference when a file has more than one of them.
	Names []string
	// Note says how the column is read.
	Note string
}

// The fields of ImportColumns, by position.
const (
	fieldID = iota
	fieldSubmit
	fieldGPUs
	fieldDuration
	fieldStart
	fieldEnd
	fieldTenant
	fieldCount
)

// PercentGPUColumn is the GPU column read as percent of one GPU unless
// ImportOptions.GPUUnit says otherwise: Alibaba PAI's plan_gpu, where 100
// is one GPU and 50 half of one.
const PercentGPUColumn = "plan_gpu"

// ImportColumns are the columns Import reads, in fieldID… order: the
// names of Microsoft Philly (jobid, vc, submitted_time, num_gpu), SenseTime
// Helios (job_id, vc, gpu_num, duration), Alibaba PAI (job_name, user,
// plan_gpu, start_time) and the generic names of other exports. A
// function, not a package variable, so that no caller can change it for
// every other.
func ImportColumns() []ImportColumn {
	return []ImportColumn{
		fieldID: {Field: "job id", Names: []string{"job_id", "jobid", "job_name", "jobname", "job", "id", "uid", "name"},
			Note: "unique per job; later rows with a seen id are skipped"},
		fieldSubmit: {Field: "submit time", Names: []string{"submit_time", "submitted_time", "submission_time", "submit",
			"timestamp", "time", "created_time", "create_time", "start_date", "start_time"},
			Note: "unix seconds or 2006-01-02 15:04:05 in UTC; start_time only when no submit column exists"},
		fieldGPUs: {Field: "GPUs", Names: []string{"gpu_num", "num_gpu", "num_gpus", "gpus", "gpu", "gpu_count", "ngpus",
			"n_gpus", "gpu_request", "gpus_requested", PercentGPUColumn},
			Note: "GPUs of the whole job, fractions rounded up; plan_gpu counts percent of one GPU, see --gpu-unit"},
		fieldDuration: {Field: "duration", Names: []string{"duration", "run_time", "runtime", "elapsed", "elapsed_time",
			"duration_sec", "wall_time"},
			Note: "seconds; when absent or empty, end time - start time"},
		fieldStart: {Field: "start time", Names: []string{"start_time", "started_time", "begin_time"},
			Note: "with the end time, the duration when there is no duration"},
		fieldEnd: {Field: "end time", Names: []string{"end_time", "finished_time", "finish_time", "completed_time"},
			Note: "with the start time, the duration when there is no duration"},
		fieldTenant: {Field: "tenant", Names: []string{"vc", "virtual_cluster", "tenant", "team", "group", "project",
			"queue", "user", "user_name", "username"},
			Note: "a namespace per tenant; --tenant-column names another column; with none, every job goes to default"},
	}
}

// ImportColumnsText is ImportColumns as an indented plain-text table, for
// --help and docs/cli.md.
func ImportColumnsText() string {
	var b strings.Builder
	for _, c := range ImportColumns() {
		fmt.Fprintf(&b, "  %-12s %s\n", c.Field, strings.Join(c.Names, ", "))
		fmt.Fprintf(&b, "  %-12s   %s\n", "", c.Note)
	}
	return b.String()
}

// TenantColumns are the header names Import reads tenants from, for a
// caller to name in a warning when none is present.
func TenantColumns() []string { return ImportColumns()[fieldTenant].Names }
