package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

var _ = Describe("ExtraArgs", func() {
	DescribeTable("merge into a component's defaults by flag name",
		func(extra, want []string) {
			args := newArgList().add("kubeconfig", "/k").add("controllers", "job").add("leader-elect", "false")
			Expect(args.override(extra)).To(Succeed())
			Expect(args.strings()).To(Equal(want))
		},
		Entry("nothing extra", nil,
			[]string{"--kubeconfig=/k", "--controllers=job", "--leader-elect=false"}),
		Entry("a named flag replaces its default in place", []string{"--controllers=*"},
			[]string{"--kubeconfig=/k", "--controllers=*", "--leader-elect=false"}),
		Entry("repeating a flag passes several values", []string{"--controllers=job", "--controllers=cronjob"},
			[]string{"--kubeconfig=/k", "--controllers=job", "--controllers=cronjob", "--leader-elect=false"}),
		Entry("new flags, with or without a value, go last", []string{"--v=4", "--profiling"},
			[]string{"--kubeconfig=/k", "--controllers=job", "--leader-elect=false", "--v=4", "--profiling"}),
	)

	It("rejects forms it cannot merge by name", func() {
		for _, bad := range []string{"-v=4", "--", "kubeconfig=/k"} {
			Expect(newArgList().override([]string{bad})).To(MatchError(ContainSubstring("want --name")), bad)
		}
	})
})

var _ = Describe("RunFor", func() {
	It("sets kwok's delay and jitter bound to the same value, making the delay exact", func() {
		Expect(RunFor(90 * time.Second)).To(Equal(map[string]string{
			"pod-complete.stage.kwok.x-k8s.io/delay":        "1m30s",
			"pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1m30s",
		}))
	})
})

var _ = Describe("GPUNode", func() {
	It("describes a kwok-managed H200 node sized by its GPU count", func() {
		node := GPUNode("h200-3", 8, map[string]string{"topology.kubernetes.io/zone": "a", LabelGPUFamily: "override"})
		Expect(node.Annotations).To(HaveKeyWithValue(FakeNodeAnnotation, FakeNodeAnnotationValue))
		Expect(node.Labels).To(And(
			HaveKeyWithValue(corev1.LabelHostname, "h200-3"),
			HaveKeyWithValue(LabelGPUProduct, "NVIDIA-H200"),
			HaveKeyWithValue(LabelGPUMemory, "143771"),
			HaveKeyWithValue(LabelGPUCount, "8"),
			HaveKeyWithValue("topology.kubernetes.io/zone", "a"),
			HaveKeyWithValue(LabelGPUFamily, "override"),
		))
		alloc := node.Status.Allocatable
		Expect(alloc.Name(GPUResource, "").Value()).To(BeEquivalentTo(8))
		Expect(alloc.Cpu().Value()).To(BeEquivalentTo(128))
		Expect(alloc.Memory().String()).To(Equal("2Ti"))
		Expect(node.Status.Capacity).To(Equal(alloc))
	})

	It("leaves GPU resources and labels off a node without GPUs", func() {
		node := GPUNode("cpu-0", 0, nil)
		Expect(node.Status.Allocatable).NotTo(HaveKey(GPUResource))
		Expect(node.Labels).NotTo(HaveKey(LabelGPUProduct))
		Expect(node.Status.Allocatable.Cpu().Value()).To(BeEquivalentTo(16))
	})
})

var _ = Describe("logTail", func() {
	It("quotes the last lines of a log", func() {
		path := filepath.Join(GinkgoT().TempDir(), "c.log")
		var lines []string
		for i := range 100 {
			lines = append(lines, fmt.Sprintf("line %d", i))
		}
		Expect(os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)).To(Succeed())
		tail := logTail(path)
		Expect(tail).To(HavePrefix("--- last 30 lines of " + path))
		Expect(tail).To(HaveSuffix("\nline 99"))
		Expect(tail).To(ContainSubstring("\nline 70\n"))
		Expect(tail).NotTo(ContainSubstring("line 69"))
	})
})
