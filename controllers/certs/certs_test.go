package certs

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	self := Options{Management: Self, Namespace: "berth-system", SecretName: "s", ServiceName: "svc", CertDir: "/certs"}
	cases := []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"self-managed defaults", func(*Options) {}, ""},
		{"external needs no Secret", func(o *Options) { *o = Options{Management: External, CertDir: "/certs"} }, ""},
		{"unknown management", func(o *Options) { o.Management = "vault" }, `must be self or external, not "vault"`},
		{"self without a Secret", func(o *Options) { o.SecretName = "" }, "need a namespace, a Secret and a Service name"},
		{"no directory", func(o *Options) { o.CertDir = "" }, "--webhook-cert-dir must not be empty"},
		{"negative validity", func(o *Options) { o.Validity = -time.Hour }, "must not be negative"},
		{"renewal after expiry", func(o *Options) { o.Validity, o.RenewBefore = time.Hour, 2*time.Hour },
			"--webhook-cert-renew-before (2h0m0s) must be shorter than --webhook-cert-validity (1h0m0s)"},
		{"short rotation", func(o *Options) { o.Validity, o.RenewBefore, o.CheckInterval = 2*time.Minute, time.Minute, time.Second }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := self
			c.change(&o)
			err := o.Validate()
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}
