package certs

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestGenerateAndValid(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Options{Namespace: "berth-system", ServiceName: "berth-webhook-service", Validity: 90 * 24 * time.Hour, Now: func() time.Time { return now }}
	data, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data[CertKey])
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[CAKey]) {
		t.Fatal("CA does not parse")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "berth-webhook-service.berth-system.svc", CurrentTime: now}); err != nil {
		t.Fatalf("serving certificate does not verify against its CA: %v", err)
	}
	cases := []struct {
		name string
		at   time.Time
		o    Options
		want bool
	}{
		{name: "fresh", at: now, o: o, want: true},
		{name: "two thirds of its life left", at: now.Add(29 * 24 * time.Hour), o: o, want: true},
		{name: "less than a third left: renew", at: now.Add(61 * 24 * time.Hour), o: o, want: false},
		{name: "issued for another service", at: now, o: Options{Namespace: "other", ServiceName: "svc"}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.at
			tc.o.Now = func() time.Time { return at }
			if got := valid(data, tc.o); got != tc.want {
				t.Errorf("valid = %v, want %v", got, tc.want)
			}
		})
	}
	if valid(map[string][]byte{CertKey: []byte("garbage")}, o) {
		t.Error("garbage must not be valid")
	}
}
