package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/admission"
	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/controllers/headroom"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/notify"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/controllers/visibility"
)

// config is every command-line knob; docs/operating.md describes each.
type config struct {
	// placeholderImage is --headroom-placeholder-image, headroomMechanism
	// --headroom-mechanism.
	placeholderImage, headroomMechanism string
	version                             bool
	metricsAddr, probeAddr              string
	metricsSecure                       bool
	leaderElect                         bool
	namespace                           string
	webhookPort                         int
	visibilityPort                      int
	certs                               certs.Options
	qps                                 float64
	burst                               int
	statusInterval                      time.Duration
	statusRate                          float64
	applyWorkers                        int
	jobWorkers                          int
	pendingStatusDelay                  time.Duration
	fairSharing                         bool
	localQueueFairSharing               bool
	localQueueMetrics                   bool
	deviceClasses                       jobs.DeviceClassMapping
	leaseDuration, renewDue             time.Duration
	notifications                       bool
	podGroups                           bool
	replicaRecords                      bool
	notify                              notifyFlags
}

// notifyFlags are the admin's say in where and how failure reports are
// delivered; docs/notifications.md explains each.
type notifyFlags struct {
	allowedCIDRs, serviceCIDRs, podCIDRs []netip.Prefix
	slackHosts                           []string
	workers                              int
	perNamespace                         int
}

// bindQueueingFlags binds the flags that choose how workloads are queued,
// ordered and started.
func bindQueueingFlags(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.fairSharing, "fair-sharing", true, "order ClusterQueues in a cohort by dominant resource share")
	fs.BoolVar(&c.localQueueFairSharing, "local-queue-fair-sharing", false,
		"share each ClusterQueue between its LocalQueues by their weights instead of serving equal priorities by creation time")
	fs.BoolVar(&c.replicaRecords, "replica-records", true,
		"admit a Deployment replica or StatefulSet ordinal that fits at once without a Workload, released with a record of its admission on its pod (one API write per replica instead of three); false queues every replica with a Workload. Records already on pods are honoured either way (docs/serving.md)")
	fs.BoolVar(&c.podGroups, "pod-groups", false,
		"hand every admitted gang of two or more pods to kube-scheduler's gang scheduling through a scheduling.k8s.io/v1beta1 PodGroup, so binding is all or nothing too; the cluster must serve PodGroups (GenericWorkload feature gate, beta and off by default in 1.37; docs/workload-aware-scheduling.md)")
}

func parseFlags(args []string, zapOpts *zap.Options) (config, error) {
	var c config
	fs := flag.NewFlagSet("berth-controller", flag.ContinueOnError)
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and authorizes (get on the /metrics non-resource URL); false serves plain HTTP to anyone, for local runs")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "elect a leader so only one replica admits; turn off only for a single local replica")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease blocks the other replicas")
	fs.DurationVar(&c.renewDue, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew its lease before it stops admitting")
	fs.StringVar(&c.namespace, "namespace", envOr("POD_NAMESPACE", "berth-system"), "namespace berth runs in (leader-election lease, certificate Secret)")
	fs.IntVar(&c.webhookPort, "webhook-port", 9443, "port of the webhook server; 0 disables the webhooks")
	bindCertFlags(fs, &c.certs)
	var visibilityService string
	fs.IntVar(&c.visibilityPort, "visibility-port", 8082, "port of the visibility API server (visibility.berth.dev, served with the webhook certificate); 0 disables it")
	fs.StringVar(&visibilityService, "visibility-service", visibility.ServiceName, "name of the Service the visibility APIService points at; the certificate is issued for it too")
	fs.Float64Var(&c.qps, "kube-api-qps", 500, "client-side limit of API requests per second (see docs/performance.md)")
	fs.IntVar(&c.burst, "kube-api-burst", 1000, "client-side burst of API requests")
	fs.DurationVar(&c.statusInterval, "queue-status-interval", 5*time.Second, "the most often a queue's counts and usage are written")
	fs.Float64Var(&c.statusRate, "queue-status-rate", 2, "the most writes per second of counts and usage for all ClusterQueues, and as many for all LocalQueues: with many queues each is written less often than --queue-status-interval; 0 sets no such limit")
	fs.IntVar(&c.applyWorkers, "apply-workers", setup.DefaultApplyWorkers, "how many admission decisions are written to the API server at once")
	fs.IntVar(&c.jobWorkers, "job-workers", setup.DefaultJobWorkers, "how many jobs of each kind are reconciled at once (Workload created, pods released or stopped)")
	fs.DurationVar(&c.pendingStatusDelay, "pending-status-delay", 0, "how long a workload waits its turn for quota before that is written to its status; 0 never writes it (the visibility API and kubectl berth explain show it); reasons that need action, and a gang's wait for capacity its flavor cannot book (TopologyUnavailable), are written at once")
	bindQueueingFlags(fs, &c)
	fs.BoolVar(&c.localQueueMetrics, "local-queue-metrics", false,
		"export per-LocalQueue series (berth_local_queue_*); their labels grow with the namespaces")
	fs.BoolVar(&c.notifications, "notifications", true,
		"report failures of admitted gangs (restarts, OOM kills, stuck pods, evictions) as NotificationPolicies ask; berth then also watches the status of the pods it started (docs/notifications.md)")
	fs.StringVar(&c.headroomMechanism, "headroom-mechanism", headroom.MechanismAuto,
		"how HeadroomPolicies' headroom is kept: auto (cluster-autoscaler CapacityBuffers where the API server serves them, placeholder pods elsewhere), capacitybuffer or placeholder; choose placeholder where the CapacityBuffer CRD is installed but cluster-autoscaler runs without --capacity-buffer-pod-injection-enabled (docs/headroom.md)")
	fs.StringVar(&c.placeholderImage, "headroom-placeholder-image", headroom.DefaultPlaceholderImage,
		"image of the placeholder pods that keep HeadroomPolicies' headroom where cluster-autoscaler serves no CapacityBuffer (a pause image; docs/headroom.md)")
	bindNotifyFlags(fs, &c.notify)
	var draMapping string
	fs.StringVar(&draMapping, "dra-device-class", "", "DRA devices counted against quota: class=resource[:amount per device],... e.g. gpu.nvidia.com=nvidia.com/gpu")
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.version {
		return c, nil
	}
	var err error
	if c.deviceClasses, err = jobs.ParseDeviceClassMapping(draMapping); err != nil {
		return c, fmt.Errorf("--dra-device-class: %w", err)
	}
	c.certs.Namespace = c.namespace
	if c.visibilityPort > 0 {
		c.certs.APIServices = []certs.APIService{{Name: visibility.APIServiceName, ServiceName: visibilityService}}
	}
	if c.servesTLS() {
		if err := c.certs.Validate(); err != nil {
			return c, err
		}
	}
	if c.applyWorkers < 1 || c.jobWorkers < 1 {
		return c, errors.New("--apply-workers and --job-workers must be at least 1")
	}
	if c.notify.workers < 1 || c.notify.perNamespace < 1 {
		return c, errors.New("--notification-workers and --notification-policies-per-namespace must be at least 1")
	}
	switch c.headroomMechanism {
	case headroom.MechanismAuto, headroom.MechanismCapacityBuffer, headroom.MechanismPlaceholder:
	default:
		return c, fmt.Errorf("--headroom-mechanism %q: use %s, %s or %s", c.headroomMechanism, headroom.MechanismAuto, headroom.MechanismCapacityBuffer, headroom.MechanismPlaceholder)
	}
	if c.statusRate < 0 {
		return c, errors.New("--queue-status-rate must not be negative: 0 sets no limit")
	}
	if c.qps <= 0 || c.burst <= 0 {
		return c, errors.New("--kube-api-qps and --kube-api-burst must be positive")
	}
	if c.leaderElect && (c.renewDue <= 0 || c.leaseDuration <= c.renewDue) {
		return c, errors.New("--leader-elect-renew-deadline must be positive and shorter than --leader-elect-lease-duration")
	}
	return c, nil
}

// servesTLS says whether anything serves with the certificate: the
// webhooks or the visibility API.
func (c config) servesTLS() bool { return c.webhookPort > 0 || c.visibilityPort > 0 }

// bindCertFlags binds the webhook certificate's flags to o.
func bindCertFlags(fs *flag.FlagSet, o *certs.Options) {
	fs.StringVar(&o.CertDir, "webhook-cert-dir", "/tmp/berth-webhook-certs", "directory of the webhook server's tls.crt and tls.key: the mounted certificate Secret")
	fs.Func("webhook-cert-management", "self: berth issues, renews and injects its webhook certificate; external: another tool (cert-manager) does (default self)", func(s string) error {
		o.Management = certs.Management(s)
		return nil
	})
	o.Management = certs.Self
	fs.StringVar(&o.ServiceName, "webhook-service", "berth-webhook-service", "name of the webhook Service the certificate is issued for")
	fs.StringVar(&o.SecretName, "webhook-secret", "berth-webhook-certs", "name of the Secret that holds the self-managed certificate")
	fs.Func("webhook-cert-dns-names", "more DNS names the self-managed certificate is valid for, comma-separated, for an API server that calls the webhooks by URL", func(s string) error {
		o.ExtraDNSNames = nil
		for n := range strings.SplitSeq(s, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.ExtraDNSNames = append(o.ExtraDNSNames, n)
			}
		}
		return nil
	})
	fs.DurationVar(&o.Validity, "webhook-cert-validity", 365*24*time.Hour, "lifetime of a self-managed serving certificate (the CA lasts ten years)")
	fs.DurationVar(&o.RenewBefore, "webhook-cert-renew-before", 90*24*time.Hour, "renew the self-managed serving certificate when this much of its life is left")
	fs.DurationVar(&o.CheckInterval, "webhook-cert-check-interval", 12*time.Hour, "how often the self-managed certificate's expiry is checked (a change to its Secret is checked at once)")
}

// bindNotifyFlags binds the flags of failure notifications' delivery to o.
func bindNotifyFlags(fs *flag.FlagSet, o *notifyFlags) {
	fs.Func("notification-allowed-cidrs", "ranges, comma-separated CIDRs or addresses, that notification sinks may be reached at although "+
		"they are loopback, link-local, private, CGNAT or the cluster's own, e.g. an internal chat server's 10.20.0.0/24 (default none)",
		cidrList(&o.allowedCIDRs))
	fs.Func("cluster-service-cidrs", "the cluster's Service ranges, comma-separated CIDRs, that notification sinks may not be reached at "+
		"unless --notification-allowed-cidrs names them; needed where they are not private addresses (default none)", cidrList(&o.serviceCIDRs))
	fs.Func("cluster-pod-cidrs", "the cluster's pod ranges, comma-separated CIDRs, that notification sinks may not be reached at "+
		"unless --notification-allowed-cidrs names them; needed where they are not private addresses (default none)", cidrList(&o.podCIDRs))
	o.slackHosts = notify.DefaultSlackHosts()
	fs.Func("notification-slack-hosts", "the hosts a Slack sink may post to, comma-separated host or host:port (443 when none); the list replaces "+
		"the default, so name Slack's hosts too to keep them (default "+strings.Join(o.slackHosts, ",")+")", func(s string) error {
		o.slackHosts = splitList(s)
		if len(o.slackHosts) == 0 {
			return errors.New("name at least one host")
		}
		return nil
	})
	fs.IntVar(&o.workers, "notification-workers", notify.DefaultDispatchOptions().Workers,
		"how many failure reports are delivered at once, each to a different namespace's sinks")
	fs.IntVar(&o.perNamespace, "notification-policies-per-namespace", notify.DefaultPoliciesPerNamespace,
		"how many NotificationPolicies of one namespace are used, the oldest first; the others say so in their Ready condition")
}

// cidrList parses a comma-separated list of CIDRs (or single addresses)
// into *dst.
func cidrList(dst *[]netip.Prefix) func(string) error {
	return func(s string) error {
		*dst = nil
		for _, item := range splitList(s) {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				a, aerr := netip.ParseAddr(item)
				if aerr != nil {
					return fmt.Errorf("%q is neither a CIDR nor an IP address", item)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			*dst = append(*dst, p.Masked())
		}
		return nil
	}
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// notifyOptions are failure notifications' options from the flags.
func notifyOptions(c config) notify.Options {
	d := notify.DefaultDispatchOptions()
	d.Workers = c.notify.workers
	return notify.Options{Enabled: c.notifications, Namespace: c.namespace, Dispatch: d,
		PoliciesPerNamespace: c.notify.perNamespace, Egress: notify.EgressOptions{
			AllowedCIDRs: c.notify.allowedCIDRs, ServiceCIDRs: c.notify.serviceCIDRs, PodCIDRs: c.notify.podCIDRs,
			SlackHosts: c.notify.slackHosts,
		}}
}

// engineOptions are the admission engine's defaults with the flags applied.
func engineOptions(c config) admission.Options {
	o := admission.DefaultOptions()
	o.FairSharing = c.fairSharing
	o.LocalQueueFairSharing = c.localQueueFairSharing
	return o
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
