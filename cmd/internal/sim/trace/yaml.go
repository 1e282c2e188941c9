package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// jobDoc is a Job as written in JSON and YAML: the same fields, with
// durations as Duration so that they read and write as "90s" rather than
// as nanoseconds. It has no methods of its own so that sigs.k8s.io/yaml
// can see its field types and read a YAML number as a string field (an
// id of 12, a namespace of 2024).
type jobDoc struct {
	ID           string              `json:"id"`
	Submit       Duration            `json:"submit"`
	Namespace    string              `json:"namespace"`
	LocalQueue   string              `json:"localQueue"`
	Kind         Kind                `json:"kind"`
	Class        string              `json:"class,omitempty"`
	Priority     int32               `json:"priority,omitempty"`
	Pods         int32               `json:"pods"`
	Requests     corev1.ResourceList `json:"requests"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Topology     Topology            `json:"topology,omitzero"`
	RunTime      Duration            `json:"runTime"`
	SLO          Duration            `json:"slo,omitzero"`
}

func docOf(j Job) jobDoc {
	return jobDoc{
		ID: j.ID, Submit: Duration{j.Submit}, Namespace: j.Namespace, LocalQueue: j.LocalQueue,
		Kind: j.Kind, Class: j.Class, Priority: j.Priority, Pods: j.Pods, Requests: j.Requests,
		NodeSelector: j.NodeSelector, Topology: j.Topology, RunTime: Duration{j.RunTime}, SLO: Duration{j.SLO},
	}
}

func (d jobDoc) job() Job {
	return Job{
		ID: d.ID, Submit: d.Submit.Duration, Namespace: d.Namespace, LocalQueue: d.LocalQueue,
		Kind: d.Kind, Class: d.Class, Priority: d.Priority, Pods: d.Pods, Requests: d.Requests,
		NodeSelector: d.NodeSelector, Topology: d.Topology, RunTime: d.RunTime.Duration, SLO: d.SLO.Duration,
	}
}

// MarshalJSON writes the job with its durations as Go duration strings
// ("90s"), the form ReadYAML and UnmarshalJSON read.
func (j Job) MarshalJSON() ([]byte, error) {
	return json.Marshal(docOf(j))
}

// UnmarshalJSON reads a job whose durations are Go duration strings or
// numbers of seconds. Unknown fields are an error even when the caller's
// decoder allows them: a misspelt optional field (slo, topology) would
// otherwise silently take its default.
func (j *Job) UnmarshalJSON(data []byte) error {
	d := docOf(*j)
	if err := decodeJSONStrict(data, &d); err != nil {
		return err
	}
	*j = d.job()
	return nil
}

// decodeJSONStrict decodes one JSON value, refusing unknown fields and
// trailing data.
func decodeJSONStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the top-level value")
	}
	return nil
}

// decodeError is a decoding error restated for the person fixing the
// file; it still wraps the original for errors.Is and errors.As.
type decodeError struct {
	msg string
	err error
}

// Error is the restated message.
func (e *decodeError) Error() string { return e.msg }

// Unwrap is the original error.
func (e *decodeError) Unwrap() error { return e.err }

// plainDecodeError drops the layers sigs.k8s.io/yaml and encoding/json
// put in front of a decoding error ("error unmarshaling JSON: while
// decoding JSON: json: ...") and the Go type names a type error shows
// (struct jobDoc), keeping what to fix: the field and what it holds.
func plainDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return &decodeError{msg: fmt.Sprintf("%s: cannot read a %s as %s", typeErr.Field, typeErr.Value, typeErr.Type), err: err}
	}
	msg := err.Error()
	for _, prefix := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return &decodeError{msg: msg, err: err}
}

// traceDoc is a trace document with its jobs left undecoded, so that each
// job is decoded on its own and a bad one is reported as jobs[i].
type traceDoc struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// ReadYAML reads a YAML (or JSON) trace: a document with a jobs list
// whose entries have Job's JSON field names. Durations are Go duration
// strings ("90s") or numbers of seconds. Unknown fields are an error. All
// problems (up to 20) are returned together, each naming its job as
// jobs[i]; the jobs are returned sorted by submit time, then ID.
func ReadYAML(r io.Reader) (Trace, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Trace{}, fmt.Errorf("reading YAML trace: %w", err)
	}
	var doc traceDoc
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return Trace{}, fmt.Errorf("reading YAML trace: %w", plainDecodeError(err))
	}
	// The raw jobs are JSON, which is YAML, so decoding each with
	// sigs.k8s.io/yaml keeps its number-to-string conversion per field.
	t, err := decodeJobs(doc, func(raw []byte, d *jobDoc) error { return yaml.UnmarshalStrict(raw, d) })
	if err != nil {
		return Trace{}, fmt.Errorf("reading YAML trace: %w", err)
	}
	return t, nil
}

// readJSON reads a JSON trace. It does not go through YAML, whose parser
// refuses the tab indentation JSON files often have.
func readJSON(r io.Reader) (Trace, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Trace{}, fmt.Errorf("reading JSON trace: %w", err)
	}
	var doc traceDoc
	if err := decodeJSONStrict(data, &doc); err != nil {
		return Trace{}, fmt.Errorf("reading JSON trace: %w", plainDecodeError(err))
	}
	t, err := decodeJobs(doc, func(raw []byte, d *jobDoc) error { return decodeJSONStrict(raw, d) })
	if err != nil {
		return Trace{}, fmt.Errorf("reading JSON trace: %w", err)
	}
	return t, nil
}

// decodeJobs decodes each job of doc with decode, validates them and
// sorts them, collecting every problem with its jobs[i] position.
func decodeJobs(doc traceDoc, decode func([]byte, *jobDoc) error) (Trace, error) {
	if doc.Jobs == nil {
		return Trace{}, errors.New("the document has no jobs list; write jobs: [] for a trace without jobs")
	}
	var (
		p    problems
		jobs = make([]Job, 0, len(doc.Jobs))
		at   = make([]int, 0, len(doc.Jobs))
	)
	for i, raw := range doc.Jobs {
		var d jobDoc
		if err := decode(raw, &d); err != nil {
			p.addf("%s: %w", rawJobWhere(i, raw), plainDecodeError(err))
			continue
		}
		jobs = append(jobs, d.job())
		at = append(at, i)
	}
	validateJobs(&p, jobs, func(i int) string { return indexWhere(at[i]) })
	if err := p.err(); err != nil {
		return Trace{}, err
	}
	sortJobs(jobs)
	return Trace{Jobs: jobs}, nil
}

// rawJobWhere names a job that did not decode by its index and, when its
// id alone decodes, its ID, as validateJobs names the others.
func rawJobWhere(i int, raw []byte) string {
	var id struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &id) != nil || id.ID == "" {
		return indexWhere(i)
	}
	return fmt.Sprintf("%s (job %s)", indexWhere(i), id.ID)
}

// WriteYAML writes the trace as YAML that ReadYAML reads back, with
// durations as Go duration strings. It refuses an invalid trace rather
// than write a file that cannot be read.
func WriteYAML(w io.Writer, t Trace) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("writing YAML trace: %w", err)
	}
	if t.Jobs == nil {
		// Written as jobs: [] rather than null, which ReadYAML refuses.
		t.Jobs = []Job{}
	}
	data, err := yaml.Marshal(t)
	if err != nil {
		return fmt.Errorf("writing YAML trace: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("writing YAML trace: %w", err)
	}
	return nil
}

// Read reads the trace file at path, choosing the format by its
// extension: .csv (ReadCSV), .yaml or .yml (ReadYAML), or .json.
func Read(path string) (Trace, error) {
	var read func(io.Reader) (Trace, error)
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".csv":
		read = ReadCSV
	case ".yaml", ".yml":
		read = ReadYAML
	case ".json":
		read = readJSON
	default:
		return Trace{}, fmt.Errorf("reading trace %s: unknown extension %q; want .csv, .yaml, .yml or .json", path, ext)
	}
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("reading trace: %w", err)
	}
	defer f.Close()
	t, err := read(f)
	if err != nil {
		return Trace{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
