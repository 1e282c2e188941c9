package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/controllers/certs"
)

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{name: "defaults serve secure metrics and manage certificates", check: func(t *testing.T, c config) {
			if !c.metricsSecure || c.metricsAddr != ":8443" {
				t.Errorf("metrics: secure=%v addr=%q, want secure on :8443", c.metricsSecure, c.metricsAddr)
			}
			if c.certs.Management != certs.Self || c.certs.Namespace != "berth-system" || c.certs.SecretName != "berth-webhook-certs" {
				t.Errorf("certs = %+v", c.certs)
			}
			// Waiting reasons are served, not written; queue status keeps
			// within a write budget (docs/performance.md).
			if c.pendingStatusDelay != 0 || c.statusRate != 2 {
				t.Errorf("pending status delay %s, queue status rate %v; want 0 and 2", c.pendingStatusDelay, c.statusRate)
			}
		}},
		{name: "--version skips validation", args: []string{"--version", "--kube-api-qps=0"}, check: func(t *testing.T, c config) {
			if !c.version {
				t.Error("version not set")
			}
		}},
		{name: "extra DNS names and rotation", args: []string{"--webhook-cert-dns-names=localhost, berth.example.com", "--webhook-cert-validity=2m", "--webhook-cert-renew-before=1m"},
			check: func(t *testing.T, c config) {
				if got := strings.Join(c.certs.ExtraDNSNames, ","); got != "localhost,berth.example.com" {
					t.Errorf("ExtraDNSNames = %q", got)
				}
				if c.certs.Validity != 2*time.Minute || c.certs.RenewBefore != time.Minute {
					t.Errorf("validity %s, renew before %s", c.certs.Validity, c.certs.RenewBefore)
				}
			}},
		{name: "unknown certificate management", args: []string{"--webhook-cert-management=vault"}, wantErr: `must be self or external, not "vault"`},
		{name: "no webhooks and no visibility API, no certificate checks", args: []string{"--webhook-port=0", "--visibility-port=0", "--webhook-cert-management=vault"}},
		{name: "the visibility API alone needs the certificate", args: []string{"--webhook-port=0", "--webhook-cert-management=vault"}, wantErr: `must be self or external, not "vault"`},
		{name: "the visibility API's Service is in the certificate", args: []string{"--visibility-service=vis"}, check: func(t *testing.T, c config) {
			want := []certs.APIService{{Name: "v1alpha1.visibility.berth.dev", ServiceName: "vis"}}
			if !slices.Equal(c.certs.APIServices, want) {
				t.Errorf("APIServices = %+v, want %+v", c.certs.APIServices, want)
			}
		}},
		{name: "no visibility API, no APIService", args: []string{"--visibility-port=0"}, check: func(t *testing.T, c config) {
			if len(c.certs.APIServices) != 0 {
				t.Errorf("APIServices = %+v, want none", c.certs.APIServices)
			}
		}},
		{name: "renewal after expiry", args: []string{"--webhook-cert-validity=1h", "--webhook-cert-renew-before=2h"}, wantErr: "must be shorter than --webhook-cert-validity"},
		{name: "lease shorter than renewal", args: []string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"}, wantErr: "shorter than --leader-elect-lease-duration"},
		{name: "no QPS", args: []string{"--kube-api-qps=0"}, wantErr: "must be positive"},
		{name: "no job workers", args: []string{"--job-workers=0"}, wantErr: "--job-workers must be at least 1"},
		{name: "negative queue status rate", args: []string{"--queue-status-rate=-1"}, wantErr: "--queue-status-rate must not be negative"},
		{name: "unknown headroom mechanism", args: []string{"--headroom-mechanism=buffers"}, wantErr: `--headroom-mechanism "buffers": use auto, capacitybuffer or placeholder`},
		{name: "bad DRA mapping", args: []string{"--dra-device-class=gpu.nvidia.com"}, wantErr: "--dra-device-class"},
		{name: "notifications keep to Slack's hosts and public addresses by default", check: func(t *testing.T, c config) {
			o := notifyOptions(c)
			if !slices.Equal(o.Egress.SlackHosts, []string{"hooks.slack.com", "hooks.slack-gov.com"}) || len(o.Egress.AllowedCIDRs) != 0 ||
				len(o.Egress.ServiceCIDRs)+len(o.Egress.PodCIDRs) != 0 {
				t.Errorf("egress = %+v, want Slack's hosts and no ranges", o.Egress)
			}
			if o.Dispatch.Workers != 4 || o.PoliciesPerNamespace != 20 || o.Dispatch.Timeout != 10*time.Second {
				t.Errorf("workers %d, policies per namespace %d, timeout %s; want 4, 20, 10s", o.Dispatch.Workers, o.PoliciesPerNamespace, o.Dispatch.Timeout)
			}
		}},
		{name: "an admin allows internal sinks and names the cluster's ranges", args: []string{
			"--notification-allowed-cidrs=10.20.0.0/24, 192.168.1.5,fd00::/8", "--cluster-service-cidrs=34.118.224.0/20",
			"--cluster-pod-cidrs=35.200.0.0/14", "--notification-slack-hosts=chat.example.com", "--notification-workers=8",
			"--notification-policies-per-namespace=5"}, check: func(t *testing.T, c config) {
			o := notifyOptions(c)
			want := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24"), netip.MustParsePrefix("192.168.1.5/32"), netip.MustParsePrefix("fd00::/8")}
			if !slices.Equal(o.Egress.AllowedCIDRs, want) {
				t.Errorf("allowed %v, want %v", o.Egress.AllowedCIDRs, want)
			}
			if o.Egress.ServiceCIDRs[0].String() != "34.118.224.0/20" || o.Egress.PodCIDRs[0].String() != "35.200.0.0/14" {
				t.Errorf("cluster ranges %v %v", o.Egress.ServiceCIDRs, o.Egress.PodCIDRs)
			}
			if !slices.Equal(o.Egress.SlackHosts, []string{"chat.example.com"}) || o.Dispatch.Workers != 8 || o.PoliciesPerNamespace != 5 {
				t.Errorf("options %+v", o)
			}
		}},
		{name: "not a CIDR", args: []string{"--notification-allowed-cidrs=10.0.0.0/33"}, wantErr: "neither a CIDR nor an IP address"},
		{name: "no Slack host", args: []string{"--notification-slack-hosts= , "}, wantErr: "name at least one host"},
		{name: "no notification workers", args: []string{"--notification-workers=0"}, wantErr: "--notification-workers and --notification-policies-per-namespace must be at least 1"},
		{name: "no policies per namespace", args: []string{"--notification-policies-per-namespace=0"}, wantErr: "--notification-workers and --notification-policies-per-namespace must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", "")
			c, err := parseFlags(tc.args, &zap.Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags(%v) = %v, want an error containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags(%v) = %v", tc.args, err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}
