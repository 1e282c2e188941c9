package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ImportOptions say how Import turns a public trace's jobs into berth
// jobs. The zero value is usable: 8-GPU nodes, nvidia.com/gpu, GPUs only,
// a namespace per tenant and the "default" LocalQueue.
type ImportOptions struct {
	// GPUsPerNode is the GPUs of one node, which sets how many pods a job
	// needs; 0 is 8.
	GPUsPerNode int32
	// GPUResource is the resource GPUs are requested as; "" is
	// nvidia.com/gpu.
	GPUResource string
	// CPUPerGPU is the CPU each pod requests per GPU; zero requests none.
	CPUPerGPU resource.Quantity
	// MemoryPerGPU is the memory each pod requests per GPU; zero requests
	// none.
	MemoryPerGPU resource.Quantity
	// Namespace maps a tenant (the trace's virtual cluster or user) to a
	// namespace; nil is TenantNamespace. Rows it maps to something that
	// is not a DNS label are skipped.
	Namespace func(tenant string) string
	// LocalQueue is the LocalQueue every job is submitted to; "" is
	// "default".
	LocalQueue string
	// TopologyLevel, when set, gives jobs of more than one pod a Required
	// topology at this node label (e.g. topology.kubernetes.io/rack).
	TopologyLevel string
	// MinDuration skips jobs that ran for less, such as the many jobs of
	// public traces that failed at once.
	MinDuration time.Duration
	// Limit stops the import once that many jobs are imported, in file
	// order (public traces are in submission order); 0 imports all.
	Limit int
	// PlanGPUPercent reads the GPU column as percent of a GPU, as Alibaba
	// PAI's plan_gpu is (100 = 1 GPU, 50 = half of one).
	PlanGPUPercent bool
}

// ImportStats count what Import did with the trace's rows.
type ImportStats struct {
	// Read is the data rows read (not counting the header).
	Read int
	// Imported is the jobs imported.
	Imported int
	// Skipped counts the rows not imported, by a short human-readable
	// reason such as "zero GPUs" or "bad duration".
	Skipped map[string]int
}

// Why Import skips a row; these are ImportStats.Skipped's keys.
const (
	skipShortRow    = "short row"
	skipNoID        = "missing job id"
	skipDuplicateID = "duplicate job id"
	skipBadSubmit   = "bad submit time"
	skipBadGPUs     = "bad GPU count"
	skipZeroGPUs    = "zero GPUs"
	skipBadDuration = "bad duration"
	skipNonPositive = "non-positive duration"
	skipShort       = "shorter than MinDuration"
	skipNamespace   = "invalid namespace"
)

// maxImportGPUs bounds a job's GPUs; more is a corrupt row, not a job.
const maxImportGPUs = 1 << 20

// The layout of datetimes in public traces (Philly, Helios), read in UTC
// so that offsets do not jump at daylight-saving changes.
const traceDateTime = "2006-01-02 15:04:05"

// importField is a column Import reads, with the header names it is
// known by in public traces, in order of preference.
type importField struct {
	name    string
	aliases []string
}

// importFields are the columns Import reads. A function, not a package
// variable, so that it cannot be changed for every caller.
func importFields() (id, submit, gpus, duration, start, end, tenant importField) {
	return importField{"job id", []string{"job_id", "jobid", "job_name", "id"}},
		importField{"submit time", []string{"submit_time", "submitted_time", "submit", "start_date"}},
		importField{"GPUs", []string{"gpu_num", "num_gpu", "gpus", "gpu_request", "plan_gpu"}},
		importField{"duration", []string{"duration", "run_time", "runtime", "elapsed"}},
		importField{"start time", []string{"start_time"}},
		importField{"end time", []string{"end_time"}},
		importField{"tenant", []string{"vc", "virtual_cluster", "user", "group"}}
}

// importLayout is the index of each column Import reads; -1 is absent.
type importLayout struct {
	id, submit, gpus, duration, start, end, tenant int
}

// importRow is one row's parsed values.
type importRow struct {
	id        string
	submit    time.Time
	gpus      int64
	runTime   time.Duration
	namespace string
}

// Import reads a public GPU-cluster trace in the common CSV layout of
// Microsoft Philly, SenseTime Helios and Alibaba PAI: one row per job
// with its id, submit time, GPUs, duration and tenant (virtual cluster or
// user). Columns are found by name, case-insensitively, under the names
// these traces use (job_id, submit_time, gpu_num, duration, vc and their
// aliases); other columns are ignored. Without a duration column (or
// where its cell is empty), the duration is end_time − start_time.
//
// Times are unix seconds or "2006-01-02 15:04:05" datetimes (UTC); a
// job's submit is its offset from the earliest imported job. Durations
// are seconds.
//
// A job of G GPUs becomes one pod of G GPUs when G ≤ GPUsPerNode, and
// otherwise ceil(G / GPUsPerNode) pods of GPUsPerNode GPUs each, which
// rounds a G that is not a multiple of GPUsPerNode up to whole nodes
// (12 GPUs on 8-GPU nodes ask for 2 × 8). Fractional GPUs round up to a
// whole GPU. CPU and memory are requested per GPU when set.
//
// Rows that cannot be imported (no GPUs, a field that does not parse, a
// non-positive duration) are skipped and counted in ImportStats by
// reason. A missing column or malformed CSV is an error.
func Import(r io.Reader, opts ImportOptions) (Trace, ImportStats, error) {
	stats := ImportStats{Skipped: map[string]int{}}
	opts, err := opts.withDefaults()
	if err != nil {
		return Trace{}, stats, fmt.Errorf("importing trace: %w", err)
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // public traces have ragged rows; they are skipped, not fatal
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return Trace{}, stats, errors.New("importing trace: the input is empty; it must start with a header row")
	}
	if err != nil {
		return Trace{}, stats, fmt.Errorf("importing trace header: %w", err)
	}
	layout, err := readImportHeader(header)
	if err != nil {
		return Trace{}, stats, fmt.Errorf("importing trace header: %w", err)
	}
	var rows []importRow
	seen := map[string]bool{}
	for opts.Limit == 0 || len(rows) < opts.Limit {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Trace{}, stats, fmt.Errorf("importing trace: %w", err)
		}
		stats.Read++
		row, reason := layout.row(rec, opts)
		if reason == "" && seen[row.id] {
			reason = skipDuplicateID
		}
		if reason != "" {
			stats.Skipped[reason]++
			continue
		}
		seen[row.id] = true
		rows = append(rows, row)
	}
	t := Trace{Jobs: importJobs(rows, opts)}
	sortJobs(t.Jobs)
	if err := t.Validate(); err != nil {
		return Trace{}, stats, fmt.Errorf("imported trace is invalid (an importer bug): %w", err)
	}
	stats.Imported = len(t.Jobs)
	return t, stats, nil
}

// withDefaults fills in the options' defaults and refuses impossible
// values.
func (o ImportOptions) withDefaults() (ImportOptions, error) {
	var errs []error
	if o.GPUsPerNode < 0 {
		errs = append(errs, fmt.Errorf("GPUsPerNode must not be negative, got %d", o.GPUsPerNode))
	}
	if o.CPUPerGPU.Sign() < 0 {
		errs = append(errs, fmt.Errorf("CPUPerGPU must not be negative, got %s", o.CPUPerGPU.String()))
	}
	if o.MemoryPerGPU.Sign() < 0 {
		errs = append(errs, fmt.Errorf("MemoryPerGPU must not be negative, got %s", o.MemoryPerGPU.String()))
	}
	if o.MinDuration < 0 {
		errs = append(errs, fmt.Errorf("MinDuration must not be negative, got %v", o.MinDuration))
	}
	if o.Limit < 0 {
		errs = append(errs, fmt.Errorf("the import limit must not be negative, got %d", o.Limit))
	}
	if o.GPUsPerNode == 0 {
		o.GPUsPerNode = 8
	}
	if o.GPUResource == "" {
		o.GPUResource = defaultGPUResource
	}
	if o.LocalQueue == "" {
		o.LocalQueue = "default"
	}
	if o.Namespace == nil {
		o.Namespace = TenantNamespace
	}
	return o, errors.Join(errs...)
}

// readImportHeader finds the columns Import reads, reporting every
// required one that is missing with the names it is known by.
func readImportHeader(header []string) (importLayout, error) {
	index := make(map[string]int, len(header))
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(name, "\uFEFF")))
		if _, dup := index[name]; !dup {
			index[name] = i
		}
	}
	find := func(f importField) int {
		for _, a := range f.aliases {
			if i, ok := index[a]; ok {
				return i
			}
		}
		return -1
	}
	id, submit, gpus, duration, start, end, tenant := importFields()
	l := importLayout{
		id: find(id), submit: find(submit), gpus: find(gpus), duration: find(duration),
		start: find(start), end: find(end), tenant: find(tenant),
	}
	var errs []error
	missing := func(i int, f importField) {
		if i < 0 {
			errs = append(errs, fmt.Errorf("no %s column; name it one of %s", f.name, strings.Join(f.aliases, ", ")))
		}
	}
	missing(l.id, id)
	missing(l.submit, submit)
	missing(l.gpus, gpus)
	if l.duration < 0 && (l.start < 0 || l.end < 0) {
		errs = append(errs, fmt.Errorf("no duration column; name it one of %s, or give start_time and end_time columns", strings.Join(duration.aliases, ", ")))
	}
	return l, errors.Join(errs...)
}

// cell is the trimmed value at column i; ok is false when the row is too
// short to have it. An absent column (-1) is an empty cell.
func cell(rec []string, i int) (string, bool) {
	if i < 0 {
		return "", true
	}
	if i >= len(rec) {
		return "", false
	}
	return strings.TrimSpace(rec[i]), true
}

// row parses one row, or says why it is skipped.
func (l importLayout) row(rec []string, opts ImportOptions) (importRow, string) {
	var cells [7]string
	for k, i := range []int{l.id, l.submit, l.gpus, l.duration, l.start, l.end, l.tenant} {
		v, ok := cell(rec, i)
		if !ok {
			return importRow{}, skipShortRow
		}
		cells[k] = v
	}
	id, submitCell, gpusCell, durationCell, startCell, endCell, tenant := cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
	if id == "" {
		return importRow{}, skipNoID
	}
	submit, err := parseTraceTime(submitCell)
	if err != nil {
		return importRow{}, skipBadSubmit
	}
	gpus, ok := parseGPUs(gpusCell, opts.PlanGPUPercent)
	switch {
	case !ok:
		return importRow{}, skipBadGPUs
	case gpus == 0:
		return importRow{}, skipZeroGPUs
	}
	runTime, ok := importDuration(durationCell, startCell, endCell)
	switch {
	case !ok:
		return importRow{}, skipBadDuration
	case runTime <= 0:
		return importRow{}, skipNonPositive
	case runTime < opts.MinDuration:
		return importRow{}, skipShort
	}
	ns := opts.Namespace(tenant)
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return importRow{}, skipNamespace
	}
	return importRow{id: id, submit: submit, gpus: gpus, runTime: runTime, namespace: ns}, ""
}

// parseTraceTime reads unix seconds (possibly fractional) or a
// "2006-01-02 15:04:05" datetime in UTC.
func parseTraceTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e12 {
			return time.Time{}, fmt.Errorf("unix time %v is out of range", f)
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
	}
	t, err := time.Parse(traceDateTime, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is neither unix seconds nor %q", s, traceDateTime)
	}
	return t, nil
}

// parseGPUs reads a GPU count, rounding a fraction up to a whole GPU.
func parseGPUs(s string, percent bool) (int64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) {
		return 0, false
	}
	if percent {
		v /= 100
	}
	if v > maxImportGPUs {
		return 0, false
	}
	return int64(math.Ceil(v)), true
}

// importDuration is the duration cell in seconds or, when it is empty,
// end − start.
func importDuration(duration, start, end string) (time.Duration, bool) {
	if duration != "" {
		f, err := strconv.ParseFloat(duration, 64)
		if err != nil {
			return 0, false
		}
		d, err := secondsToDuration(f)
		return d, err == nil
	}
	s, err := parseTraceTime(start)
	if err != nil {
		return 0, false
	}
	e, err := parseTraceTime(end)
	if err != nil {
		return 0, false
	}
	return e.Sub(s), true
}

// importJobs turns the rows into jobs, submitted at their offset from the
// earliest row.
func importJobs(rows []importRow, opts ImportOptions) []Job {
	if len(rows) == 0 {
		return []Job{}
	}
	earliest := rows[0].submit
	for _, r := range rows[1:] {
		if r.submit.Before(earliest) {
			earliest = r.submit
		}
	}
	jobs := make([]Job, 0, len(rows))
	for _, r := range rows {
		pods, perPod := gangShape(r.gpus, int64(opts.GPUsPerNode))
		j := Job{
			ID:         r.id,
			Submit:     r.submit.Sub(earliest),
			Namespace:  r.namespace,
			LocalQueue: opts.LocalQueue,
			Kind:       Training,
			Pods:       int32(pods),
			Requests:   importRequests(perPod, opts),
			RunTime:    r.runTime,
		}
		if pods > 1 && opts.TopologyLevel != "" {
			j.Topology = Topology{Mode: Required, Level: opts.TopologyLevel}
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// gangShape is the pods and GPUs per pod of a job of gpus GPUs on nodes
// of perNode GPUs: one pod when it fits a node, else whole nodes.
func gangShape(gpus, perNode int64) (pods, perPod int64) {
	if gpus <= perNode {
		return 1, gpus
	}
	return (gpus + perNode - 1) / perNode, perNode
}

// importRequests is a pod's requests for gpus GPUs.
func importRequests(gpus int64, opts ImportOptions) corev1.ResourceList {
	reqs := corev1.ResourceList{
		corev1.ResourceName(opts.GPUResource): *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	perGPU := map[corev1.ResourceName]resource.Quantity{
		corev1.ResourceCPU:    opts.CPUPerGPU,
		corev1.ResourceMemory: opts.MemoryPerGPU,
	}
	for name, q := range perGPU {
		if q.IsZero() {
			continue
		}
		total := q.DeepCopy()
		total.Mul(gpus)
		reqs[name] = total
	}
	return reqs
}

// TenantNamespace is Import's default mapping of a tenant to a
// namespace: the tenant as a DNS label, lowercased, with each run of
// other characters turned into one "-", trimmed to 63 characters; an
// empty result (no tenant column, or a tenant of only symbols) is
// "default". Distinct tenants may map to one namespace ("Team_A" and
// "team-a"), which then share it.
func TenantNamespace(tenant string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(tenant) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	s := b.String()
	if len(s) > validation.DNS1123LabelMaxLength {
		s = strings.TrimRight(s[:validation.DNS1123LabelMaxLength], "-")
	}
	if s == "" {
		return "default"
	}
	return s
}
