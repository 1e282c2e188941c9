package runner

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/berth-dev/berth/test/perf/scenario"
)

// Report is what one run measured, with the scenario's floors. Durations
// are in seconds. It is written as JSON and printed as a table (WriteTable).
type Report struct {
	Scenario    string    `json:"scenario"`
	Description string    `json:"description,omitempty"`
	Mode        Mode      `json:"mode"`
	Started     time.Time `json:"started"`
	// Command is the runner's command line.
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
	Berth   Berth   `json:"berth"`

	Workloads int `json:"workloads"`
	Created   int `json:"created"`
	Admitted  int `json:"admitted"`
	Finished  int `json:"finished"`
	// Failures are (up to 10) workloads the runner gave up on: not
	// created, or not finished or requeued after many tries.
	Failures []string `json:"failures,omitempty"`
	TimedOut bool     `json:"timedOut,omitempty"`

	// WallSeconds runs from the first create to the last finish.
	WallSeconds float64       `json:"wallSeconds"`
	Floors      Floors        `json:"floors"`
	Ratios      Ratios        `json:"ratios"`
	Classes     []ClassReport `json:"classes"`
	Usage       Usage         `json:"usage"`
	Requests    Requests      `json:"requests"`
	Processes   Processes     `json:"processes"`
	Runner      LoadStats     `json:"runner"`

	// Evictions berth made (preemptions).
	Evictions int `json:"evictions"`
	// PendingReasonWrites counts the pending reasons berth wrote to
	// Workloads, as the runner's watch saw them change.
	PendingReasonWrites int `json:"pendingReasonWrites"`
	// QuotaViolations lists (up to 10) admissions after which, replaying the
	// writes in etcd order, more quota was held than a ClusterQueue or
	// cohort has; QuotaViolationCount counts all.
	QuotaViolations     []string `json:"quotaViolations,omitempty"`
	QuotaViolationCount int      `json:"quotaViolationCount"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	GoVersion string `json:"goVersion"`
	OSArch    string `json:"osArch"`
	Commit    string `json:"commit"`
	Dirty     bool   `json:"dirty"`
}

// Berth is how berth-controller ran.
type Berth struct {
	// Source says what was built: "working tree", "revision <sha>" or
	// "binary <path>".
	Source     string   `json:"source"`
	QPS        float64  `json:"qps"`
	Burst      int      `json:"burst"`
	Preemption string   `json:"preemption"`
	Args       []string `json:"args"`
}

// Floors are lower bounds on the wall time that the scenario itself sets.
type Floors struct {
	// QuotaSeconds is the makespan of an ideal zero-latency greedy
	// scheduler replayed on the scenario (scenario.Replay).
	QuotaSeconds float64 `json:"quotaSeconds"`
	// QuotaWaits are that scheduler's times to admission, per class.
	QuotaWaits map[string]Seconds `json:"quotaWaits"`
	// ControllerWrites is the fewest writes berth needs: one admission per
	// workload (in jobs mode also the Workload's creation and the Job's
	// start).
	ControllerWrites int `json:"controllerWrites"`
	// WriteSeconds is ControllerWrites ÷ berth's client QPS.
	WriteSeconds float64 `json:"writeSeconds"`
	// APIWrites adds the runner's (creates and finishes) to
	// ControllerWrites.
	APIWrites int `json:"apiWrites"`
	// APISeconds is APIWrites ÷ the calibrated write rate; 0 without
	// calibration.
	APISeconds  float64      `json:"apiSeconds"`
	Calibration *Calibration `json:"calibration,omitempty"`
	// BindingSeconds is the largest floor.
	BindingSeconds float64 `json:"bindingSeconds"`
}

// Ratios are the wall time over each floor (0 when the floor is unknown).
type Ratios struct {
	WallToQuota   float64 `json:"wallToQuota"`
	WallToWrite   float64 `json:"wallToWrite"`
	WallToAPI     float64 `json:"wallToAPI"`
	WallToBinding float64 `json:"wallToBinding"`
}

// Seconds summarises durations, in seconds.
type Seconds struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func toSeconds(s scenario.Summary) Seconds {
	return Seconds{Count: s.Count, Mean: s.Mean.Seconds(), P50: s.P50.Seconds(), P90: s.P90.Seconds(),
		P99: s.P99.Seconds(), Max: s.Max.Seconds()}
}

// ClassReport is the time to admission of one class: from the runner's
// create call to the runner's watch seeing the workload admitted.
type ClassReport struct {
	Name      string  `json:"name"`
	Workloads int     `json:"workloads"`
	Wait      Seconds `json:"wait"`
	// FloorMean is the replay's mean wait; MeanToFloor the ratio (0 when
	// the floor is 0).
	FloorMean   float64 `json:"floorMean"`
	MeanToFloor float64 `json:"meanToFloor"`
}

// Usage is ClusterQueue usage of each queue's first quota resource, as a
// percentage of nominal quota (above 100 while borrowing).
type Usage struct {
	Resource        string  `json:"resource"`
	IntervalSeconds float64 `json:"intervalSeconds"`
	// MeanPercent is all queues' usage over all queues' nominal quota,
	// averaged over the wall time.
	MeanPercent float64 `json:"meanPercent"`
	// Deciles are MeanPercent over each tenth of the wall time; -1 for a
	// tenth without samples.
	Deciles []float64 `json:"deciles"`
	// Total is the all-queue percentage at every sample.
	Total []float64 `json:"total"`
	// ClusterQueues have each queue's mean and peak, and its samples when
	// the scenario has at most 64 queues.
	ClusterQueues []QueueUsage `json:"clusterQueues"`
	// Cohorts have each cohort's samples when there are more than 64 queues.
	Cohorts []QueueUsage `json:"cohorts,omitempty"`
}

// QueueUsage is one queue's (or cohort's) usage.
type QueueUsage struct {
	Name        string    `json:"name"`
	MeanPercent float64   `json:"meanPercent"`
	PeakPercent float64   `json:"peakPercent"`
	Samples     []float64 `json:"samples,omitempty"`
}

// Requests are berth's API requests during the run: from the first create
// to the end of the run.
type Requests struct {
	// ByMethod counts by HTTP method, from berth's
	// rest_client_requests_total (includes its event recorder).
	ByMethod map[string]int `json:"byMethod"`
	// ByRequest counts by "verb resource[/subresource]", from the API
	// server's audit log; nil when auditing was off.
	ByRequest map[string]int `json:"byRequest,omitempty"`
	// Conflicts and Errors are requests answered 409, and other 4xx/5xx
	// (audit).
	Conflicts int `json:"conflicts"`
	Errors    int `json:"errors"`
	// Writes are create, update, patch and delete requests (audit when on,
	// else POST, PUT, PATCH and DELETE).
	Writes int `json:"writes"`
	// WritesPerAdmitted is Writes over admitted workloads.
	WritesPerAdmitted float64 `json:"writesPerAdmitted"`
	// SetupByMethod counts what berth did before the first create (start-up,
	// queue status).
	SetupByMethod map[string]int `json:"setupByMethod"`
}

// Processes is the CPU time (during the run) and peak memory (whole life)
// of each process.
type Processes struct {
	Berth     ProcUsage `json:"berth"`
	APIServer ProcUsage `json:"apiserver"`
	Etcd      ProcUsage `json:"etcd"`
	Runner    ProcUsage `json:"runner"`
	// APIServerCPUPerAdmitted is the API server's CPU seconds over admitted
	// workloads: what each admission costs the part that bounds the run.
	APIServerCPUPerAdmitted float64 `json:"apiserverCPUPerAdmitted"`
	// BerthPeakRSSPer1000 is berth's peak RSS in bytes per 1,000 admitted
	// workloads.
	BerthPeakRSSPer1000 float64 `json:"berthPeakRSSPer1000"`
}

// ProcUsage is one process's share.
type ProcUsage struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	// CoresBusy is CPUSeconds over the run's duration.
	CoresBusy    float64 `json:"coresBusy"`
	PeakRSSBytes int64   `json:"peakRSSBytes"`
}

// LoadStats say whether the runner kept up: how late its creates were, how
// long after their runtime workloads were seen finished, and what the runner
// sent.
type LoadStats struct {
	CreateLag Seconds `json:"createLag"`
	FinishLag Seconds `json:"finishLag"`
	// FinishWrite (due to the finish write returning) and FinishSeen (that
	// to the watch delivering it) split FinishLag in workloads mode.
	FinishWrite      Seconds        `json:"finishWrite"`
	FinishSeen       Seconds        `json:"finishSeen"`
	RequestsByMethod map[string]int `json:"requestsByMethod"`
}

// machine describes this machine and checkout.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	m.Commit = gitOutput("rev-parse", "HEAD")
	m.Dirty = gitOutput("status", "--porcelain", "--untracked-files=no") != ""
	return m
}

// gitOutput runs git in the checkout and returns its output, or "".
func gitOutput(args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
