package consistency

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/test/tools/release/chart"
)

// TestBadValuesAreRejected: values berth-controller would not accept, or
// that cannot work together, fail the render with a message that names the
// value and what is allowed — from values.schema.json, or from the
// chart's own checks (templates/validate.yaml) for what a schema cannot
// express.
func TestBadValuesAreRejected(t *testing.T) {
	cases := []struct {
		set  []string
		want []string
	}{
		{[]string{"certManagement=vault"}, []string{"/certManagement", "'self', 'cert-manager'"}},
		{[]string{"replicas=0"}, []string{"/replicas", "minimum"}},
		{[]string{"replica=3"}, []string{"additional properties 'replica' not allowed"}},
		{[]string{"controller.qps=5"}, []string{"/controller", "'qps' not allowed"}},
		{[]string{"image.digest=sha256:xyz"}, []string{"/image/digest", "sha256:[0-9a-f]{64}"}},
		{[]string{"image.pullPolicy=Sometimes"}, []string{"/image/pullPolicy", "'IfNotPresent'"}},
		{[]string{"controller.kubeAPIQPS=fast"}, []string{"/controller/kubeAPIQPS"}},
		{[]string{"controller.kubeAPIBurst=-1"}, []string{"/controller/kubeAPIBurst", "minimum"}},
		{[]string{"controller.queueStatusRate=-1"}, []string{"/controller/queueStatusRate", "minimum"}},
		{[]string{"controller.applyWorkers=many"}, []string{"/controller/applyWorkers"}},
		{[]string{"controller.jobWorkers=0"}, []string{"/controller/jobWorkers", "minimum"}},
		{[]string{"controller.fairSharing=yes"}, []string{"/controller/fairSharing"}},
		{[]string{"controller.draDeviceClasses={nvidia.com/gpu}"}, []string{"/controller/draDeviceClasses/0"}},
		{[]string{"leaderElection.leaseDuration=15 seconds"}, []string{"/leaderElection/leaseDuration", "pattern"}},
		{[]string{"logging.encoder=xml"}, []string{"/logging/encoder", "'json', 'console'"}},
		{[]string{"logging.level=verbose"}, []string{"/logging/level"}},
		{[]string{"webhook.port=70000"}, []string{"/webhook/port", "maximum"}},
		{[]string{"webhook.certDir=certs"}, []string{"/webhook/certDir"}},
		{[]string{"certManager.issuerRef.kind=Vault"}, []string{"/certManager/issuerRef/kind", "'Issuer', 'ClusterIssuer'"}},
		{[]string{"metrics.readers[0].name=prometheus"}, []string{"/metrics/readers/0", "namespace"}},
		{[]string{"podDisruptionBudget.minAvailable=half"}, []string{"/podDisruptionBudget/minAvailable"}},
		{[]string{"resources.limits.memory=lots"}, []string{"/resources/limits/memory"}},
		{[]string{"leaderElection.enabled=false"}, []string{"validate.yaml", "leaderElection.enabled=false needs replicas: 1"}},
		{[]string{"metrics.enabled=false", "metrics.serviceMonitor.enabled=true"}, []string{"need metrics.enabled=true"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			_, err := renderErr("berth-system", releasedChart(t), nil, c.set...)
			if err == nil {
				t.Fatal("rendered; want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestMonitoringNeedsItsAPI: without prometheus-operator's API the chart
// says so rather than rendering objects the cluster would refuse.
func TestMonitoringNeedsItsAPI(t *testing.T) {
	_, err := chart.Render(chart.RenderOptions{
		Chart: releasedChart(t), Namespace: "berth-system", ReleaseName: "berth",
		Set: []string{"metrics.serviceMonitor.enabled=true"}, NoDefaultAPIVersions: true,
	})
	if err == nil || !strings.Contains(err.Error(), "monitoring.coreos.com/v1 API") {
		t.Errorf("error %v, want one naming the monitoring.coreos.com/v1 API", err)
	}
}
