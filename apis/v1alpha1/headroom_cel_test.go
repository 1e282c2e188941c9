package v1alpha1

import (
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// TestHeadroomPolicyCELRules runs the HeadroomPolicy CRD's CEL rules, after
// its defaults, on spec.sizing: what the API server accepts and the message
// it gives for what it refuses.
func TestHeadroomPolicyCELRules(t *testing.T) {
	s := crdSchema(t, "../../config/crd/bases/berth.dev_headroompolicies.yaml")
	v := cel.NewValidator(s, true, celconfig.PerCallLimit)
	for _, tc := range []struct {
		name, sizing string
		want         string // "" when accepted
	}{
		{name: "fixed", sizing: `{mode: Fixed, replicas: 2}`},
		{name: "percent within bounds", sizing: `{mode: Percent, percent: 20, min: 1, max: 4}`},
		{name: "demand with its defaults", sizing: `{mode: Demand, demand: {}, min: 2}`},
		{name: "demand with a day and a latency", sizing: `{mode: Demand, demand: {window: 24h, provisioningLatency: 10m, percentile: 90}}`},
		{name: "fixed without replicas", sizing: `{mode: Fixed}`, want: "mode Fixed needs replicas"},
		{name: "percent without percent", sizing: `{mode: Percent, replicas: 3}`, want: "mode Percent needs percent"},
		{name: "demand without a rule", sizing: `{mode: Demand}`, want: "mode Demand needs demand"},
		{name: "min above max", sizing: `{mode: Fixed, replicas: 1, min: 5, max: 2}`, want: "min must not exceed max"},
		{name: "latency longer than the window", sizing: `{mode: Demand, demand: {window: 10m, provisioningLatency: 15m}}`,
			want: "provisioningLatency must be positive and no longer than window"},
		{name: "a window beyond a week", sizing: `{mode: Demand, demand: {window: 200h}}`, want: "window is at most 168h"},
		{name: "a daily period within a window that holds it and its lead", sizing: `{mode: Demand, demand: {window: 26h, period: 24h, lead: 45m}}`},
		{name: "a daily period whose default lead (the latency) fits", sizing: `{mode: Demand, demand: {window: 25h, period: 24h}}`},
		{name: "a period and lead beyond the window", sizing: `{mode: Demand, demand: {window: 24h, period: 24h, lead: 30m}}`,
			want: "period plus lead must fit in window"},
		{name: "a lead without a period", sizing: `{mode: Demand, demand: {lead: 30m}}`, want: "lead goes with period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkCEL(t, s, v, "apiVersion: berth.dev/v1alpha1\nkind: HeadroomPolicy\nmetadata: {name: h, namespace: serving}\n"+
				"spec: {targetRef: {kind: Deployment, name: chat}, sizing: "+tc.sizing+"}\n", tc.want)
		})
	}
}
