package importkueue

import (
	"fmt"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// provisioning gives the flavors of a ClusterQueue with a Kueue
// provisioning check the policy of its ProvisioningRequestConfig. berth
// books capacity per flavor, not per queue, so a flavor that two queues'
// configs disagree about keeps the first and the conflict is reported.
func (c *converter) provisioning(cq *kueue.ClusterQueue) {
	s := cq.Spec.AdmissionChecksStrategy
	if s == nil {
		return
	}
	for _, rule := range s.AdmissionChecks {
		ac, ok := c.admissionCheck(string(rule.Name))
		if !ok {
			c.unmapped("ClusterQueue", cq.Name, "spec.admissionChecksStrategy",
				fmt.Sprintf("AdmissionCheck %q is not in the input: add it and its ProvisioningRequestConfig", rule.Name))
			continue
		}
		if ac.Spec.ControllerName != kueue.ProvisioningRequestControllerName {
			continue // reported with the AdmissionCheck
		}
		policy, ok := c.policyOf(ac)
		if !ok {
			continue
		}
		flavors := rule.OnFlavors
		if len(flavors) == 0 {
			for _, rg := range cq.Spec.ResourceGroups {
				for _, f := range rg.Flavors {
					flavors = append(flavors, f.Name)
				}
			}
		}
		from := cq.Name + "/" + ac.Name
		for _, f := range flavors {
			if have, ok := c.policies[string(f)]; ok && have.from != from && !samePolicy(have.policy, policy) {
				c.unmapped("ClusterQueue", cq.Name, "spec.admissionChecksStrategy",
					fmt.Sprintf("flavor %s books capacity as %s says; berth has one provisioning policy per flavor, so %s's differing one is not used",
						f, have.from, ac.Name))
				continue
			}
			c.policies[string(f)] = flavorPolicy{policy: policy, from: from}
		}
	}
}

func (c *converter) admissionCheck(name string) (*kueue.AdmissionCheck, bool) {
	for i := range c.in.AdmissionChecks {
		if c.in.AdmissionChecks[i].Name == name {
			return &c.in.AdmissionChecks[i], true
		}
	}
	return nil, false
}

// policyOf maps a provisioning AdmissionCheck's ProvisioningRequestConfig.
// Kueue books before every admission, so the policy's mode is Always.
func (c *converter) policyOf(ac *kueue.AdmissionCheck) (*berthv1.ProvisioningPolicy, bool) {
	ref := ac.Spec.Parameters
	if ref == nil {
		return &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningAlways}, true
	}
	var cfg *kueue.ProvisioningRequestConfig
	for i := range c.in.ProvisioningConfigs {
		if c.in.ProvisioningConfigs[i].Name == ref.Name {
			cfg = &c.in.ProvisioningConfigs[i]
		}
	}
	if cfg == nil {
		c.unmapped("AdmissionCheck", ac.Name, "spec.parameters",
			fmt.Sprintf("ProvisioningRequestConfig %q is not in the input: add it", ref.Name))
		return nil, false
	}
	p := &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningAlways}
	s := cfg.Spec
	for k, v := range s.Parameters {
		if p.Parameters == nil {
			p.Parameters = map[string]string{}
		}
		p.Parameters[k] = string(v)
	}
	if r := s.RetryStrategy; r != nil {
		if r.BackoffLimitCount != nil {
			p.MaxAttempts = *r.BackoffLimitCount + 1 // the first attempt and its retries
		}
		if r.BackoffBaseSeconds != nil {
			p.BackoffSeconds = *r.BackoffBaseSeconds
		}
		if r.BackoffMaxSeconds != nil {
			c.unmapped("ProvisioningRequestConfig", cfg.Name, "spec.retryStrategy.backoffMaxSeconds",
				"berth doubles the backoff up to a day; the cap is not configurable")
		}
	}
	c.configNotes(cfg)
	return p, true
}

// configNotes reports what of a ProvisioningRequestConfig berth decides
// itself.
func (c *converter) configNotes(cfg *kueue.ProvisioningRequestConfig) {
	s := cfg.Spec
	if s.ProvisioningClassName != "" {
		c.unmapped("ProvisioningRequestConfig", cfg.Name, "spec.provisioningClassName",
			fmt.Sprintf("berth picks the class per gang (check-capacity when existing nodes may do, best-effort-atomic-scale-up otherwise); %q is not used",
				s.ProvisioningClassName))
	}
	if len(s.ManagedResources) > 0 {
		c.unmapped("ProvisioningRequestConfig", cfg.Name, "spec.managedResources",
			"berth books every gang of the flavor, whatever it requests")
	}
	if s.PodSetUpdates != nil {
		c.unmapped("ProvisioningRequestConfig", cfg.Name, "spec.podSetUpdates",
			"berth pins admitted pods to the domain it booked; node selectors from the booking's answer are not copied")
	}
	if s.PodSetMergePolicy != nil {
		c.unmapped("ProvisioningRequestConfig", cfg.Name, "spec.podSetMergePolicy", "berth sends one pod set per gang pod set")
	}
}

func samePolicy(a, b *berthv1.ProvisioningPolicy) bool {
	if a.Mode != b.Mode || a.MaxAttempts != b.MaxAttempts || a.BackoffSeconds != b.BackoffSeconds || len(a.Parameters) != len(b.Parameters) {
		return false
	}
	for _, k := range sortedKeys(a.Parameters) {
		if a.Parameters[k] != b.Parameters[k] {
			return false
		}
	}
	return true
}
