package trace

import (
	"cmp"
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
	// GPUUnit is how the GPU column counts: GPUUnitGPUs, GPUUnitPercent
	// (percent of one GPU, as Alibaba PAI's plan_gpu: 100 = 1 GPU, 50 =
	// half of one), or "" for percent when the column is plan_gpu and
	// GPUs otherwise.
	GPUUnit GPUUnit
	// TenantColumn, when set, is the header name (case-insensitive) of the
	// column that holds the tenant, instead of the first of ImportColumns'
	// tenant names; a header without it is an error.
	TenantColumn string

	// maxJobs and maxPods lower MaxTraceJobs and MaxTracePods, so that
	// tests can reach the caps without a million-row input; 0 is the cap.
	maxJobs, maxPods int64
}

// GPUUnit is how an imported trace's GPU column counts.
type GPUUnit string

const (
	// GPUUnitAuto reads plan_gpu as percent and any other column as GPUs.
	GPUUnitAuto GPUUnit = ""
	// GPUUnitGPUs reads the column as GPUs (fractions round up).
	GPUUnitGPUs GPUUnit = "gpus"
	// GPUUnitPercent reads the column as percent of one GPU, rounding up
	// to whole GPUs since the simulator counts whole GPUs: 50 is 1 GPU,
	// 250 is 3.
	GPUUnitPercent GPUUnit = "percent"
)

// ImportStats count what Import did with the trace's rows.
type ImportStats struct {
	// Read is the data rows read (not counting the header).
	Read int
	// Imported is the jobs imported.
	Imported int
	// Skipped counts the rows not imported, by a short human-readable
	// reason such as "zero GPUs" or "bad duration".
	Skipped map[string]int
	// TenantColumn is the header name the tenants were read from; "" when
	// there was none and every job's tenant is empty (namespace default).
	TenantColumn string
	// GPUColumn is the header name the GPUs were read from, and GPUUnit
	// how they were counted (GPUUnitGPUs or GPUUnitPercent).
	GPUColumn string
	GPUUnit   GPUUnit
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

// The layout of datetimes in public traces (Philly, Helios), read in UTC
// so that offsets do not jump at daylight-saving changes.
const traceDateTime = "2006-01-02 15:04:05"

// importLayout is the index of each column Import reads; -1 is absent.
type importLayout struct {
	id, submit, gpus, duration, start, end, tenant int
	// percent reads the GPU column as percent of one GPU.
	percent bool
}

// importRow is one row's parsed values.
type importRow struct {
	id        string
	submit    time.Time
	gpus      int64
	pods      int64
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
	layout, err := readImportHeader(header, opts)
	if err != nil {
		return Trace{}, stats, fmt.Errorf("importing trace header: %w", err)
	}
	stats.TenantColumn, stats.GPUColumn, stats.GPUUnit = headerName(header, layout.tenant), headerName(header, layout.gpus), GPUUnitGPUs
	if layout.percent {
		stats.GPUUnit = GPUUnitPercent
	}
	rows, err := readImportRows(cr, layout, opts, &stats)
	if err != nil {
		return Trace{}, stats, fmt.Errorf("importing trace: %w", err)
	}
	t := Trace{Jobs: importJobs(rows, opts)}
	sortJobs(t.Jobs)
	if err := t.Validate(); err != nil {
		return Trace{}, stats, fmt.Errorf("imported trace is invalid (an importer bug): %w", err)
	}
	stats.Imported = len(t.Jobs)
	return t, stats, nil
}

// readImportRows reads the data rows up to opts.Limit, counting skipped
// ones in stats. It stops with an error at the first row that takes the
// trace over a cap (MaxJobPods, MaxTraceJobs, MaxTracePods), before that
// row is kept, so that a corrupt or oversized trace costs no memory.
func readImportRows(cr *csv.Reader, layout importLayout, opts ImportOptions, stats *ImportStats) ([]importRow, error) {
	var rows []importRow
	var pods int64
	seen := map[string]bool{}
	for opts.Limit == 0 || len(rows) < opts.Limit {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
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
		line, _ := cr.FieldPos(0)
		if err := opts.checkCaps(row, line, int64(len(rows)), pods); err != nil {
			return nil, err
		}
		pods += row.pods
		seen[row.id] = true
		rows = append(rows, row)
	}
	return rows, nil
}

// checkCaps refuses a row that is over MaxJobPods, or that would take the
// trace, which holds jobs jobs and pods pods before it, over MaxTraceJobs
// or MaxTracePods. The message says the cap and how to get under it.
func (o ImportOptions) checkCaps(row importRow, line int, jobs, pods int64) error {
	maxJobs, maxPods := cmp.Or(o.maxJobs, MaxTraceJobs), cmp.Or(o.maxPods, MaxTracePods)
	switch {
	case row.pods > MaxJobPods:
		return fmt.Errorf("line %d (job %s): %d GPUs on %d-GPU nodes make %d pods, more than the simulator takes for one job (%d); "+
			"drop the row, or raise --gpus-per-node if the nodes are larger", line, row.id, row.gpus, o.GPUsPerNode, row.pods, MaxJobPods)
	case jobs+1 > maxJobs:
		return fmt.Errorf("line %d (job %s): the trace has more than %d jobs, the most the simulator takes; "+
			"import the first part with --limit or split the file by submit time and simulate each part", line, row.id, maxJobs)
	case pods+row.pods > maxPods:
		return fmt.Errorf("line %d (job %s): the jobs up to this row have %d pods, more than the simulator takes (%d in all); "+
			"import fewer rows with --limit or split the file by submit time and simulate each part", line, row.id, pods+row.pods, maxPods)
	}
	return nil
}

// headerName is the trimmed header name of column i, "" when absent.
func headerName(header []string, i int) string {
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(header[i], "\uFEFF"))
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
func readImportHeader(header []string, opts ImportOptions) (importLayout, error) {
	index := make(map[string]int, len(header))
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(name, "\uFEFF")))
		if _, dup := index[name]; !dup {
			index[name] = i
		}
	}
	cols := ImportColumns()
	var at [fieldCount]int
	for f := range at {
		at[f] = -1
		for _, a := range cols[f].Names {
			if i, ok := index[a]; ok {
				at[f] = i
				break
			}
		}
	}
	l := importLayout{id: at[fieldID], submit: at[fieldSubmit], gpus: at[fieldGPUs], duration: at[fieldDuration],
		start: at[fieldStart], end: at[fieldEnd], tenant: at[fieldTenant]}
	var errs []error
	if opts.TenantColumn != "" {
		i, ok := index[strings.ToLower(strings.TrimSpace(opts.TenantColumn))]
		if !ok {
			i = -1
			errs = append(errs, fmt.Errorf("no tenant column %q (--tenant-column); the header has %s", opts.TenantColumn, strings.Join(header, ", ")))
		}
		l.tenant = i
	}
	missing := func(i, f int) {
		if i < 0 {
			errs = append(errs, fmt.Errorf("no %s column; name it one of %s", cols[f].Field, strings.Join(cols[f].Names, ", ")))
		}
	}
	missing(l.id, fieldID)
	missing(l.submit, fieldSubmit)
	missing(l.gpus, fieldGPUs)
	if l.duration < 0 && (l.start < 0 || l.end < 0) {
		errs = append(errs, fmt.Errorf("no duration column; name it one of %s, or give start and end time columns (%s; %s)",
			strings.Join(cols[fieldDuration].Names, ", "), strings.Join(cols[fieldStart].Names, ", "), strings.Join(cols[fieldEnd].Names, ", ")))
	}
	switch opts.GPUUnit {
	case GPUUnitPercent:
		l.percent = true
	case GPUUnitAuto:
		l.percent = l.gpus >= 0 && strings.EqualFold(headerName(header, l.gpus), PercentGPUColumn)
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
	gpus, ok := parseGPUs(gpusCell, l.percent)
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
	pods, _ := gangShape(gpus, int64(opts.GPUsPerNode))
	return importRow{id: id, submit: submit, gpus: gpus, pods: pods, runTime: runTime, namespace: ns}, ""
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

// parseGPUs reads a GPU count, or percent of one GPU, rounding a
// fraction up to a whole GPU: the simulator places whole GPUs, and a job
// that asked for part of one still takes a GPU from the others. Counts
// beyond maxParsedGPUs are clamped there, which is far over MaxJobPods
// of any node size, so that checkCaps reports them rather than the
// conversion overflowing.
func parseGPUs(s string, percent bool) (int64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 1) {
		return 0, false
	}
	if percent {
		v /= 100
	}
	return int64(math.Ceil(min(v, maxParsedGPUs))), true
}

// maxParsedGPUs is where parseGPUs clamps a GPU count.
const maxParsedGPUs = 1 << 50

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
