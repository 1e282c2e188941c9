package commands

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

func TestParseExplainTarget(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantKind string
		wantName string
		wantErr  string
	}{
		{"job", []string{"job/train"}, "Job", "train", ""},
		{"kind and name apart", []string{"jobset", "big"}, "JobSet", "big", ""},
		{"lws short name", []string{"lws/serve"}, "LeaderWorkerSet", "serve", ""},
		{"pod group", []string{"podgroup/eval"}, podGroupKind, "eval", ""},
		{"workload", []string{"Workload/job-train-1a2b3"}, "Workload", "job-train-1a2b3", ""},
		{"deployment", []string{"deployment/web"}, "Deployment", "web", ""},
		{"deploy short name", []string{"deploy/web"}, "Deployment", "web", ""},
		{"deployments", []string{"deployments", "web"}, "Deployment", "web", ""},
		{"deployment.apps", []string{"deployment.apps/web"}, "Deployment", "web", ""},
		{"statefulset", []string{"statefulset/kv"}, "StatefulSet", "kv", ""},
		{"sts short name", []string{"sts/kv"}, "StatefulSet", "kv", ""},
		{"statefulsets", []string{"statefulsets/kv"}, "StatefulSet", "kv", ""},
		{"statefulset.apps", []string{"StatefulSet.apps/kv"}, "StatefulSet", "kv", ""},
		{"trainjob", []string{"trainjob/finetune"}, "TrainJob", "finetune", ""},
		{"trainjob with its group", []string{"trainjob.trainer.kubeflow.org/finetune"}, "TrainJob", "finetune", ""},
		{"unknown kind", []string{"service/web"}, "", "", `"service" is not a kind explain knows: use deployment, job, jobset, leaderworkerset, lws, mpijob, podgroup, pytorchjob, raycluster, rayjob, statefulset, trainjob, workload`},
		{"no slash", []string{"train"}, "", "", "name what to explain as KIND/NAME"},
		{"no name", []string{"job/"}, "", "", "the name is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, name, err := parseExplainTarget(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || k.kind != tc.wantKind || name != tc.wantName {
				t.Errorf("= %s %q %v, want %s %q", k.kind, name, err, tc.wantKind, tc.wantName)
			}
		})
	}
}

// TestListAndExplainRefuseBadArguments: what is wrong with the command
// line is said before the cluster is asked anything.
func TestListAndExplainRefuseBadArguments(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"list in xml", []string{"list", "workloads", "-o", "xml"}, `--output "xml": use wide, json or yaml`},
		{"list queues in xml", []string{"list", "cq", "-o", "name"}, `--output "name"`},
		{"explain a bad kind", []string{"explain", "svc/x"}, "use deployment, job, jobset, leaderworkerset, lws, mpijob, podgroup, pytorchjob, raycluster, rayjob, statefulset, trainjob, workload"},
		{"explain wide", []string{"explain", "job/x", "-o", "wide"}, `--output "wide": use json or yaml`},
		{"explain nothing", []string{"explain"}, "accepts between 1 and 2 arg(s), received 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestExplainKindCompletion(t *testing.T) {
	got, _ := explainKindCompletion(nil, nil, "")
	if strings.Join(got, " ") != "deployment/ job/ jobset/ leaderworkerset/ lws/ mpijob/ podgroup/ pytorchjob/ raycluster/ rayjob/ statefulset/ trainjob/ workload/" {
		t.Errorf("completions %v", got)
	}
	if got, _ := explainKindCompletion(nil, nil, "job/tr"); got != nil {
		t.Errorf("completes names: %v", got)
	}
}

func TestWriteExplanation(t *testing.T) {
	now := time.Now()
	meta := metav1.ObjectMeta{Namespace: "research", Name: "job-train-1", CreationTimestamp: metav1.NewTime(now.Add(-5 * time.Minute))}
	base := workloadItem{Metadata: meta, Job: visv1.JobReference{Kind: "Job", Name: "train"}, LocalQueue: "team", ClusterQueue: "gpus"}
	pending := base
	pending.Status, pending.Reason, pending.Message = statusPending, "InsufficientQuota", "needs 8 nvidia.com/gpu of h200, 2 available"
	pending.Pending = &visv1.PendingWorkload{PositionInClusterQueue: 2, PositionInLocalQueue: 1,
		Shortfalls: []visv1.Shortfall{{Flavor: "h200", Resource: "nvidia.com/gpu", Requested: resource.MustParse("8"), Available: resource.MustParse("2")}},
		Preemption: visv1.Preemption{Message: "no preemption allowed by the ClusterQueue's policy makes the workload fit"}}
	line := &visv1.PendingWorkloadsSummary{Total: 3, FairShare: visv1.FairShare{Cohort: "lab", WeightedShare: "0.25", ClusterQueuesAhead: 1}}
	admitted := base
	admitted.Status = statusAdmitted
	admitted.Admission = &berthv1.Admission{ClusterQueue: "gpus",
		PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 4, Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}},
		Topology:          &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"a", "r1"}}}
	admitted.Provisioning = &berthv1.ProvisioningStatus{Attempt: 1, State: berthv1.ProvisioningProvisioned, RequestName: "pr-1", ClassName: "check-capacity.autoscaling.x-k8s.io"}
	deactivated := base
	deactivated.Status, deactivated.Message = statusDeactivated, "spec.active is false"
	finished := base
	finished.Status, finished.Reason = statusFinished, "Succeeded"
	stopped := base
	stopped.Status, stopped.Reason = statusPending, string(berthv1.ReasonLocalQueueStopped)
	cases := []struct {
		name string
		ex   explained
		want []string
	}{
		{"pending", explained{item: pending, line: line}, []string{
			"Workload:", "research/job-train-1, of job/train", "LocalQueue team, ClusterQueue gpus",
			"2 in ClusterQueue gpus (2 pending workloads are admitted before it), 1 in LocalQueue team (of 3 pending there)",
			"Why it waits:", "InsufficientQuota: needs 8", "flavor h200: needs 8 nvidia.com/gpu, 2 available",
			"preemption: not possible: no preemption allowed", "weighted share 0.25 in cohort lab; 1 ClusterQueue with pending work"}},
		{"pending, line unreadable", explained{item: pending, lineErr: errors.New("forbidden")}, []string{"Position:", "unknown: forbidden"}},
		{"held by a stopped LocalQueue", explained{item: stopped, line: &visv1.PendingWorkloadsSummary{}}, []string{
			"not in ClusterQueue gpus's line", "kubectl berth resume localqueue team -n research", "in no cohort"}},
		{"admitted", explained{item: admitted}, []string{"Admitted: it holds quota of ClusterQueue gpus",
			"pod set main: 4 pods on flavor h200 (nvidia.com/gpu)", "one domain of flavor h200: zone=a, rack=r1",
			"attempt 1, Provisioned, ProvisioningRequest pr-1 (class check-capacity.autoscaling.x-k8s.io)"}},
		{"deactivated", explained{item: deactivated}, []string{"Deactivated: spec.active is false", "kubectl berth activate workload job-train-1 -n research"}},
		{"finished", explained{item: finished}, []string{"Finished (Succeeded): its quota is released"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeExplanation(&out, tc.ex, now); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("explanation lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
