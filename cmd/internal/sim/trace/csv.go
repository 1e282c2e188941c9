package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The CSV trace's column names.
const (
	colID            = "id"
	colSubmit        = "submit"
	colNamespace     = "namespace"
	colLocalQueue    = "localQueue"
	colKind          = "kind"
	colClass         = "class"
	colPriority      = "priority"
	colPods          = "pods"
	colRequests      = "requests"
	colNodeSelector  = "nodeSelector"
	colTopologyMode  = "topologyMode"
	colTopologyLevel = "topologyLevel"
	colRunTime       = "runTime"
	colSLO           = "slo"
)

// csvHeader is the CSV trace's columns in the order WriteCSV writes them.
// It is a function rather than a package variable so that no caller can
// change the layout for everyone.
func csvHeader() []string {
	return []string{
		colID, colSubmit, colNamespace, colLocalQueue, colKind, colClass, colPriority,
		colPods, colRequests, colNodeSelector, colTopologyMode, colTopologyLevel, colRunTime, colSLO,
	}
}

// csvOptional reports whether a column may be left out of the header;
// the others hold what every job needs.
func csvOptional(col string) bool {
	switch col {
	case colClass, colPriority, colNodeSelector, colTopologyMode, colTopologyLevel, colSLO:
		return true
	}
	return false
}

// csvLayout maps a column name to its index in the file's rows.
type csvLayout map[string]int

// ReadCSV reads a CSV trace. The first row is the header, naming the
// columns in any order: id, submit, namespace, localQueue, kind, class,
// priority, pods, requests, nodeSelector, topologyMode, topologyLevel,
// runTime, slo (names match case-insensitively). class, priority,
// nodeSelector, topologyMode, topologyLevel and slo may be left out;
// unknown columns are an error, since they are most often a misspelling
// of one that would then silently be missing.
//
// Durations (submit, runTime, slo) are Go durations ("90s", "2h") or
// plain seconds ("90", "1.5"). requests are per pod, as
// "cpu=8;memory=64Gi;nvidia.com/gpu=8", nodeSelector as "k=v;k2=v2". An
// empty cell is the field's zero value, which validation then reports
// where the field is required.
//
// All problems (up to 20) are returned together, each naming its line
// and job. The jobs are returned sorted by submit time, then ID.
func ReadCSV(r io.Reader) (Trace, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return Trace{}, fmt.Errorf("reading CSV trace: the input is empty; it must start with a header row: %s", strings.Join(csvHeader(), ","))
	}
	if err != nil {
		return Trace{}, fmt.Errorf("reading CSV trace header: %w", err)
	}
	layout, err := readCSVHeader(header)
	if err != nil {
		return Trace{}, fmt.Errorf("reading CSV trace header: %w", err)
	}
	var (
		p     problems
		jobs  []Job
		lines []int
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, csv.ErrFieldCount) {
			return Trace{}, fmt.Errorf("reading CSV trace: %w; the header has %d columns", err, len(header))
		}
		if err != nil {
			return Trace{}, fmt.Errorf("reading CSV trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(jobs) == MaxTraceJobs {
			// Stop reading rather than hold an unbounded file in memory.
			return Trace{}, fmt.Errorf("reading CSV trace: line %d: the trace has more than %d jobs, the most the simulator takes: "+
				"split it by submit time into parts under the cap and simulate each", line, MaxTraceJobs)
		}
		job, errs := layout.job(rec)
		if len(errs) > 0 {
			at := csvWhere(line, job.ID)
			for _, e := range errs {
				p.addf("%s: %w", at, e)
			}
			continue
		}
		jobs = append(jobs, job)
		lines = append(lines, line)
	}
	validateJobs(&p, jobs, func(i int) string { return fmt.Sprintf("line %d", lines[i]) })
	if err := p.err(); err != nil {
		return Trace{}, fmt.Errorf("reading CSV trace: %w", err)
	}
	sortJobs(jobs)
	return Trace{Jobs: jobs}, nil
}

// csvWhere names a row for an error message, as validateJobs does.
func csvWhere(line int, id string) string {
	if id == "" {
		return fmt.Sprintf("line %d", line)
	}
	return fmt.Sprintf("line %d (job %s)", line, id)
}

// readCSVHeader matches the header's names to the known columns and
// reports, at once, every unknown, repeated or missing required column.
func readCSVHeader(header []string) (csvLayout, error) {
	known := make(map[string]string, len(csvHeader()))
	for _, c := range csvHeader() {
		known[strings.ToLower(c)] = c
	}
	layout := make(csvLayout, len(header))
	var unknown, repeated, missing []string
	for i, name := range header {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\uFEFF"))
		col, ok := known[strings.ToLower(name)]
		switch {
		case !ok:
			unknown = append(unknown, strconv.Quote(name))
		case layoutHas(layout, col):
			repeated = append(repeated, col)
		default:
			layout[col] = i
		}
	}
	for _, c := range csvHeader() {
		if !csvOptional(c) && !layoutHas(layout, c) {
			missing = append(missing, c)
		}
	}
	var errs []error
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("unknown columns %s; the known columns are %s", strings.Join(unknown, ", "), strings.Join(csvHeader(), ",")))
	}
	if len(repeated) > 0 {
		errs = append(errs, fmt.Errorf("columns given more than once: %s", strings.Join(repeated, ", ")))
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing required columns: %s", strings.Join(missing, ", ")))
	}
	return layout, errors.Join(errs...)
}

func layoutHas(l csvLayout, col string) bool {
	_, ok := l[col]
	return ok
}

// cell is the trimmed value of a column in rec, "" when the file has no
// such column.
func (l csvLayout) cell(rec []string, col string) string {
	i, ok := l[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(rec[i])
}

// job parses one row. It returns every cell that does not parse, each
// naming its column; validation of the parsed values is left to
// validateJobs so that CSV and YAML report the same rules alike.
func (l csvLayout) job(rec []string) (Job, []error) {
	j := Job{
		ID:         l.cell(rec, colID),
		Namespace:  l.cell(rec, colNamespace),
		LocalQueue: l.cell(rec, colLocalQueue),
		Kind:       Kind(l.cell(rec, colKind)),
		Class:      l.cell(rec, colClass),
		Topology: Topology{
			Mode:  TopologyMode(l.cell(rec, colTopologyMode)),
			Level: l.cell(rec, colTopologyLevel),
		},
	}
	var errs []error
	check := func(col string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", col, err))
		}
	}
	var err error
	j.Submit, err = parseDuration(l.cell(rec, colSubmit))
	check(colSubmit, err)
	j.RunTime, err = parseDuration(l.cell(rec, colRunTime))
	check(colRunTime, err)
	j.SLO, err = parseDuration(l.cell(rec, colSLO))
	check(colSLO, err)
	j.Pods, err = parseInt32(l.cell(rec, colPods))
	check(colPods, err)
	j.Priority, err = parseInt32(l.cell(rec, colPriority))
	check(colPriority, err)
	j.Requests, err = parseRequests(l.cell(rec, colRequests))
	check(colRequests, err)
	j.NodeSelector, err = parsePairs(l.cell(rec, colNodeSelector))
	check(colNodeSelector, err)
	return j, errs
}

// parseInt32 reads a whole number; "" is zero.
func parseInt32(s string) (int32, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid whole number %q", s)
	}
	return int32(v), nil
}

// parsePairs reads "k=v;k2=v2"; empty segments (a trailing ";") are
// ignored and "" is no pairs.
func parsePairs(s string) (map[string]string, error) {
	var out map[string]string
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value; write pairs as k=v;k2=v2", part)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("key %q is given more than once", k)
		}
		if out == nil {
			out = make(map[string]string)
		}
		out[k] = v
	}
	return out, nil
}

// parseRequests reads "cpu=8;memory=64Gi;nvidia.com/gpu=8".
func parseRequests(s string) (corev1.ResourceList, error) {
	pairs, err := parsePairs(s)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(corev1.ResourceList, len(pairs))
	for _, k := range sortedKeys(pairs) {
		q, err := resource.ParseQuantity(pairs[k])
		if err != nil {
			return nil, fmt.Errorf("%s=%s is not a quantity (like 8, 500m or 64Gi): %w", k, pairs[k], err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// WriteCSV writes the trace as CSV with every column, in the order
// ReadCSV documents, so that ReadCSV reads back the same trace. It
// refuses an invalid trace rather than write a file that cannot be read.
func WriteCSV(w io.Writer, t Trace) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("writing CSV trace: %w", err)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader()); err != nil {
		return fmt.Errorf("writing CSV trace header: %w", err)
	}
	for _, j := range t.Jobs {
		if err := cw.Write(csvRecord(j)); err != nil {
			return fmt.Errorf("writing CSV trace job %s: %w", j.ID, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV trace: %w", err)
	}
	return nil
}

// csvRecord is a job's row in csvHeader order.
func csvRecord(j Job) []string {
	reqs := make(map[string]string, len(j.Requests))
	for name, q := range j.Requests {
		reqs[string(name)] = q.String()
	}
	return []string{
		j.ID, j.Submit.String(), j.Namespace, j.LocalQueue, string(j.Kind), j.Class,
		strconv.FormatInt(int64(j.Priority), 10), strconv.FormatInt(int64(j.Pods), 10),
		formatPairs(reqs), formatPairs(j.NodeSelector), string(j.Topology.Mode), j.Topology.Level,
		j.RunTime.String(), formatOptionalDuration(j.SLO),
	}
}

// formatPairs writes "k=v;k2=v2" in key order, for stable output.
func formatPairs(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ";")
}

// formatOptionalDuration leaves a zero duration blank, since zero means
// "none" for the optional duration columns.
func formatOptionalDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
