package runner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/test/perf/runner"
	"github.com/berth-dev/berth/test/perf/scenario"
)

var _ = Describe("the smoke scenario", Ordered, func() {
	var berthBinary string

	BeforeAll(func(ctx SpecContext) {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
		berthBinary = filepath.Join(GinkgoT().TempDir(), "berth-controller")
		Expect(runner.BuildBerth(ctx, "", berthBinary)).To(Succeed())
	}, NodeTimeout(5*time.Minute))

	run := func(ctx SpecContext, mode runner.Mode, calibrate int, audit bool) *runner.Report {
		s, err := scenario.Named("smoke")
		Expect(err).NotTo(HaveOccurred())
		rep, err := runner.Run(ctx, runner.Options{
			Scenario: s, Mode: mode, BerthBinary: berthBinary, CalibrationWorkloads: calibrate,
			Audit: audit, Timeout: 2 * time.Minute, Progress: GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		var table bytes.Buffer
		Expect(rep.WriteTable(&table)).To(Succeed())
		GinkgoWriter.Println(table.String())

		By("admitting and finishing every workload within quota")
		Expect(rep.Created).To(Equal(58))
		Expect(rep.Admitted).To(Equal(rep.Workloads))
		Expect(rep.Finished).To(Equal(rep.Workloads))
		Expect(rep.QuotaViolations).To(BeEmpty())
		Expect(rep.WallSeconds).To(BeNumerically(">=", 1))

		By("reporting every figure")
		Expect(rep.Floors.QuotaSeconds).To(BeNumerically("~", 2.9, 1e-9))
		Expect(rep.Classes).To(HaveLen(3))
		for _, c := range rep.Classes {
			Expect(c.Wait.Count).To(Equal(c.Workloads), c.Name)
		}
		Expect(rep.Usage.Total).NotTo(BeEmpty())
		Expect(rep.Usage.ClusterQueues).To(HaveLen(2))
		if audit {
			Expect(rep.Requests.ByRequest).To(HaveKeyWithValue("patch workloads/status", BeNumerically(">=", rep.Workloads)))
		} else {
			Expect(rep.Requests.ByRequest).To(BeNil(), "without the audit log requests are counted by method")
		}
		Expect(rep.Requests.ByMethod).To(HaveKeyWithValue("PATCH", BeNumerically(">=", rep.Workloads)))
		Expect(rep.Requests.Writes).To(BeNumerically(">=", rep.Workloads), "one admission write per workload at least")
		Expect(rep.Processes.Berth.CPUSeconds).To(BeNumerically(">", 0))
		Expect(rep.Processes.Berth.PeakRSSBytes).To(BeNumerically(">", 1<<20))
		Expect(rep.Processes.APIServer.CPUSeconds).To(BeNumerically(">", 0))
		Expect(rep.Processes.APIServerCPUPerAdmitted).To(BeNumerically("~", rep.Processes.APIServer.CPUSeconds/float64(rep.Admitted), 1e-9))
		Expect(rep.Processes.BerthPeakRSSPer1000).To(BeNumerically(">", rep.Processes.Berth.PeakRSSBytes))

		path := filepath.Join(GinkgoT().TempDir(), "report.json")
		Expect(rep.WriteJSON(path)).To(Succeed())
		data, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		var back runner.Report
		Expect(json.Unmarshal(data, &back)).To(Succeed())
		Expect(back.Workloads).To(Equal(rep.Workloads))
		return rep
	}

	It("runs as Workloads, with the API floor calibrated", func(ctx SpecContext) {
		rep := run(ctx, runner.ModeWorkloads, 300, false)
		Expect(rep.Floors.Calibration).NotTo(BeNil())
		Expect(rep.Floors.APISeconds).To(BeNumerically(">", 0))
	}, NodeTimeout(5*time.Minute))

	It("runs as batch/v1 Jobs, with berth's requests in the audit log", func(ctx SpecContext) {
		rep := run(ctx, runner.ModeJobs, -1, true)
		Expect(rep.Requests.ByRequest).To(HaveKeyWithValue("create workloads", rep.Workloads))
	}, NodeTimeout(5*time.Minute))
})
