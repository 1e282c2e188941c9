package consistency

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// flagCase sets chart values (as helm --set) and expects one argument of
// berth-controller's.
type flagCase struct {
	flag string
	sets []string
	want string
}

// flagCases cover every berth-controller flag the chart offers, each set
// to a value other than its default.
var flagCases = []flagCase{
	{"leader-elect", []string{"leaderElection.enabled=false", "replicas=1"}, "--leader-elect=false"},
	{"leader-elect-lease-duration", []string{"leaderElection.leaseDuration=30s"}, "--leader-elect-lease-duration=30s"},
	{"leader-elect-renew-deadline", []string{"leaderElection.renewDeadline=20s"}, "--leader-elect-renew-deadline=20s"},
	{"metrics-bind-address", []string{"metrics.port=9090"}, "--metrics-bind-address=:9090"},
	{"metrics-bind-address", []string{"metrics.enabled=false"}, "--metrics-bind-address=0"},
	{"metrics-secure", []string{"metrics.secure=false"}, "--metrics-secure=false"},
	{"health-probe-bind-address", []string{"healthProbe.port=9091"}, "--health-probe-bind-address=:9091"},
	{"webhook-port", []string{"webhook.port=10443"}, "--webhook-port=10443"},
	{"webhook-cert-dir", []string{"webhook.certDir=/certs"}, "--webhook-cert-dir=/certs"},
	{"webhook-cert-management", []string{"certManagement=cert-manager"}, "--webhook-cert-management=external"},
	{"webhook-secret", []string{"webhook.secretName=webhook-tls"}, "--webhook-secret=webhook-tls"},
	{"webhook-cert-dns-names", []string{"webhook.certDNSNames={a.example.com,b.example.com}"}, "--webhook-cert-dns-names=a.example.com,b.example.com"},
	{"webhook-cert-validity", []string{"webhook.certValidity=48h"}, "--webhook-cert-validity=48h"},
	{"webhook-cert-renew-before", []string{"webhook.certRenewBefore=12h"}, "--webhook-cert-renew-before=12h"},
	{"webhook-cert-check-interval", []string{"webhook.certCheckInterval=1h"}, "--webhook-cert-check-interval=1h"},
	{"visibility-port", []string{"visibility.port=9082"}, "--visibility-port=9082"},
	{"visibility-port", []string{"visibility.enabled=false"}, "--visibility-port=0"},
	{"kube-api-qps", []string{"controller.kubeAPIQPS=750.5"}, "--kube-api-qps=750.5"},
	{"kube-api-qps", []string{"controller.kubeAPIQPS=2000000"}, "--kube-api-qps=2000000"},
	{"kube-api-burst", []string{"controller.kubeAPIBurst=1500"}, "--kube-api-burst=1500"},
	{"queue-status-interval", []string{"controller.queueStatusInterval=10s"}, "--queue-status-interval=10s"},
	{"queue-status-rate", []string{"controller.queueStatusRate=0.5"}, "--queue-status-rate=0.5"},
	{"queue-status-rate", []string{"controller.queueStatusRate=0"}, "--queue-status-rate=0"},
	{"apply-workers", []string{"controller.applyWorkers=32"}, "--apply-workers=32"},
	{"job-workers", []string{"controller.jobWorkers=4"}, "--job-workers=4"},
	{"pending-status-delay", []string{"controller.pendingStatusDelay=2m"}, "--pending-status-delay=2m"},
	{"fair-sharing", []string{"controller.fairSharing=false"}, "--fair-sharing=false"},
	{"local-queue-fair-sharing", []string{"controller.localQueueFairSharing=true"}, "--local-queue-fair-sharing=true"},
	{"pod-groups", []string{"controller.podGroups=true"}, "--pod-groups=true"},
	{"replica-records", []string{"controller.replicaRecords=false"}, "--replica-records=false"},
	{"local-queue-metrics", []string{"controller.localQueueMetrics=true"}, "--local-queue-metrics=true"},
	{"notifications", []string{"controller.notifications=false"}, "--notifications=false"},
	{"notification-allowed-cidrs", []string{"controller.notificationAllowedCIDRs={10.20.30.0/24,fd00::/8}"}, "--notification-allowed-cidrs=10.20.30.0/24,fd00::/8"},
	{"cluster-service-cidrs", []string{"controller.clusterServiceCIDRs={34.118.224.0/20}"}, "--cluster-service-cidrs=34.118.224.0/20"},
	{"cluster-pod-cidrs", []string{"controller.clusterPodCIDRs={35.200.0.0/14}"}, "--cluster-pod-cidrs=35.200.0.0/14"},
	{"notification-slack-hosts", []string{"controller.notificationSlackHosts={hooks.slack.com,chat.example.com}"}, "--notification-slack-hosts=hooks.slack.com,chat.example.com"},
	{"notification-workers", []string{"controller.notificationWorkers=8"}, "--notification-workers=8"},
	{"notification-policies-per-namespace", []string{"controller.notificationPoliciesPerNamespace=5"}, "--notification-policies-per-namespace=5"},
	{"dra-device-class", []string{"controller.draDeviceClasses={gpu.nvidia.com=nvidia.com/gpu,gpu.amd.com=amd.com/gpu:2}"},
		"--dra-device-class=gpu.nvidia.com=nvidia.com/gpu,gpu.amd.com=amd.com/gpu:2"},
	{"headroom-placeholder-image", []string{"controller.headroomPlaceholderImage=mirror.example.com/pause:3.10"}, "--headroom-placeholder-image=mirror.example.com/pause:3.10"},
	{"headroom-mechanism", []string{"controller.headroomMechanism=placeholder"}, "--headroom-mechanism=placeholder"},
	{"zap-log-level", []string{"logging.level=debug"}, "--zap-log-level=debug"},
	{"zap-log-level", []string{"logging.level=3"}, "--zap-log-level=3"},
	{"zap-encoder", []string{"logging.encoder=console"}, "--zap-encoder=console"},
	{"zap-devel", []string{"logging.development=true"}, "--zap-devel=true"},
	{"zap-stacktrace-level", []string{"logging.stacktraceLevel=panic"}, "--zap-stacktrace-level=panic"},
	{"zap-time-encoding", []string{"logging.timeEncoding=rfc3339"}, "--zap-time-encoding=rfc3339"},
}

// notInChart are berth-controller's flags the chart deliberately does not
// offer, and why. extraArgs can still pass them.
var notInChart = map[string]string{
	"version":            "prints the version and exits: not a way to run berth",
	"namespace":          "POD_NAMESPACE, from the downward API, is the release namespace already",
	"webhook-service":    "the webhook configurations (generated) call the Service berth-webhook-service by that name",
	"visibility-service": "the APIService points at the Service berth-visibility by that name",
}

// TestFlagsReachTheArgs: each value the chart offers for a flag, set to a
// value other than its default, appears as that flag in the container's
// arguments, and berth-controller's own flag parser accepts the arguments.
func TestFlagsReachTheArgs(t *testing.T) {
	bin := controllerBinary(t)
	for _, c := range flagCases {
		t.Run(c.want, func(t *testing.T) {
			// Without the CRDs, which have no arguments and are most of
			// the render's time.
			args := manager(t, render(t, "berth-system", nil, append(c.sets, "crds.install=false")...)).Args
			if !slices.Contains(args, c.want) {
				t.Fatalf("--set %s: args %q lack %s", strings.Join(c.sets, " --set "), args, c.want)
			}
			checkParses(t, bin, args)
		})
	}
	t.Run("extraArgs", func(t *testing.T) {
		args := manager(t, render(t, "berth-system", nil, "controller.extraArgs={--zap-log-level=5,--apply-workers=4}")).Args
		if n := len(args); n < 2 || args[n-2] != "--zap-log-level=5" || args[n-1] != "--apply-workers=4" {
			t.Errorf("args %q do not end with the extra ones", args)
		}
		checkParses(t, bin, args)
	})
}

// TestChartCoversEveryFlag fails when berth-controller has a flag that
// neither flagCases tests nor notInChart explains: a new flag needs a value
// in the chart (values.yaml, values.schema.json, _helpers.tpl, README.md)
// and a case above. It also fails on a case for a flag that is gone.
func TestChartCoversEveryFlag(t *testing.T) {
	flags := controllerFlags(t, controllerBinary(t))
	covered := map[string]bool{}
	for _, c := range flagCases {
		covered[c.flag] = true
	}
	for _, f := range flags {
		if !covered[f] && notInChart[f] == "" {
			t.Errorf("berth-controller --%s is not in the chart: add a value for it and a flagCase", f)
		}
	}
	for f := range covered {
		if !slices.Contains(flags, f) {
			t.Errorf("flagCases test --%s, which berth-controller no longer has", f)
		}
	}
	for f := range notInChart {
		if !slices.Contains(flags, f) {
			t.Errorf("notInChart names --%s, which berth-controller no longer has", f)
		}
	}
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// controllerBinary builds berth-controller from the checkout, once.
func controllerBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := sharedTempDir()
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "berth-controller")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binaryPath, "./cmd/berth-controller")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = &buildError{err: err, out: string(out)}
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// flagLine is how flag.PrintDefaults starts a flag's entry.
var flagLine = regexp.MustCompile(`^  -([a-z0-9][a-z0-9-]*)`)

// controllerFlags are the flags berth-controller --help lists.
func controllerFlags(t testing.TB, bin string) []string {
	t.Helper()
	out, _ := exec.Command(bin, "--help").CombinedOutput() // exits 2 after printing
	if !bytes.Contains(out, []byte("Usage of berth-controller")) {
		t.Fatalf("berth-controller --help printed no usage:\n%s", out)
	}
	var flags []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
			flags = append(flags, m[1])
		}
	}
	if len(flags) < 20 {
		t.Fatalf("found only %d flags in berth-controller --help:\n%s", len(flags), out)
	}
	sort.Strings(flags)
	return flags
}

// checkParses runs berth-controller with args and --version, which parses
// every flag (a bad duration, number or name fails) and then only prints
// the version.
func checkParses(t testing.TB, bin string, args []string) {
	t.Helper()
	out, err := exec.Command(bin, append(slices.Clone(args), "--version")...).CombinedOutput()
	if err != nil {
		t.Errorf("berth-controller rejects the chart's args %q: %v\n%s", args, err, out)
	}
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "building berth-controller: " + e.err.Error() + "\n" + e.out
}
