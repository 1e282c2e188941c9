package kubectlberth_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/test/framework"
)

// modelAPIVersion is the apiVersion of the scenario's Model document.
const modelAPIVersion = "sim.berth.dev/v1alpha1"

// policies are the policies simulate compares by default, in the order of
// its report.
var policies = []string{"uncoordinated", "quota-only", "berth"}

// report is simulate's JSON report, as a user's script reads it: each
// policy's result field by field, so that two reports compare whole.
type report struct {
	Results []map[string]any `json:"results"`
}

var _ = Describe("kubectl berth simulate --from-cluster", func() {
	// The fidelity scenario's objects, applied to the cluster (where the
	// apiserver defaults and berth validates them) and read back, simulate
	// as the file they came from does.
	It("simulates the cluster's objects as it simulates the file they were applied from", func(ctx SpecContext) {
		dir := filepath.Join(framework.RepoRoot(), "test", "simulation", "fidelity")
		scenarioFile := filepath.Join(dir, "scenario.yaml")
		traceFile := filepath.Join(dir, "trace.csv")
		data, err := os.ReadFile(scenarioFile)
		Expect(err).NotTo(HaveOccurred())
		var objects, model []string
		for _, doc := range strings.Split(string(data), "\n---\n") {
			if strings.Contains(doc, "apiVersion: "+modelAPIVersion) {
				model = append(model, doc)
			} else {
				objects = append(objects, doc)
			}
		}
		Expect(model).To(HaveLen(1), "the scenario holds one Model")
		modelFile := filepath.Join(GinkgoT().TempDir(), "model.yaml")
		Expect(os.WriteFile(modelFile, []byte(model[0]), 0o600)).To(Succeed())

		for _, ns := range []string{"fidelity-vision", "fidelity-nlp"} {
			Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		Expect(applyAll(ctx, strings.Join(objects, "\n---\n"), "")).To(Succeed())

		args := []string{"simulate", "-o", "json", "--timeline", "--trace", traceFile}
		fromFile := simulateReport(append(args, "-f", scenarioFile)...)
		fromCluster := simulateReport(append(args, "--from-cluster", "--model", modelFile)...)
		Expect(fromCluster.Results).To(HaveLen(len(policies)))
		for i, r := range fromCluster.Results {
			want := fromFile.Results[i]
			Expect(want["policy"]).To(Equal(policies[i]))
			// The cluster may hold other specs' ClusterQueues; the
			// scenario's own must have the same shares.
			r["tenants"] = onlyTenants(r["tenants"], want["tenants"])
			Expect(r).To(Equal(want), "policy %s", want["policy"])
		}
		Expect(fromFile.Results[2]["timeline"]).To(HaveLen(5), "every job of the trace has its times")
	})

	It("says what to fix when the cluster's objects do not make a scenario", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sim-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		traceFile := filepath.Join(GinkgoT().TempDir(), "trace.csv")
		Expect(os.WriteFile(traceFile, []byte("id,submit,namespace,localQueue,kind,class,priority,pods,requests,nodeSelector,topologyMode,topologyLevel,runTime,slo\n"+
			"x,0s,"+ns.Name+",nowhere,training,,0,1,nvidia.com/gpu=8,,,,1m,\n"), 0o600)).To(Succeed())
		_, _, err := berth("", "simulate", "--from-cluster", "--trace", traceFile)
		Expect(err).To(MatchError(ContainSubstring("job x: LocalQueue " + ns.Name + "/nowhere is not in the scenario")))
		Expect(env.Client.Delete(ctx, ns)).To(Succeed())
	})
})

// simulateReport runs kubectl berth with args against the plane and
// decodes its JSON report.
func simulateReport(args ...string) report {
	GinkgoHelper()
	out, errOut, err := berth("", args...)
	Expect(err).NotTo(HaveOccurred(), "stderr: %s", errOut)
	var rep report
	Expect(json.Unmarshal([]byte(out), &rep)).To(Succeed())
	return rep
}

// onlyTenants keeps the shares (the report's "tenants" list) of the
// ClusterQueues that want has.
func onlyTenants(got, want any) any {
	GinkgoHelper()
	clusterQueue := func(t any) string {
		m, ok := t.(map[string]any)
		Expect(ok).To(BeTrue(), "a tenant share is an object: %v", t)
		name, _ := m["clusterQueue"].(string)
		return name
	}
	names := map[string]bool{}
	wantList, _ := want.([]any)
	for _, t := range wantList {
		names[clusterQueue(t)] = true
	}
	gotList, _ := got.([]any)
	out := []any{}
	for _, t := range gotList {
		if names[clusterQueue(t)] {
			out = append(out, t)
		}
	}
	if len(out) == 0 && want == nil {
		return nil
	}
	return out
}
