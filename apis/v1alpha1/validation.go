package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks the rules of a ClusterQueue that its schema cannot:
// non-negative quantities, lendingLimit within nominalQuota, and each
// flavor and each resource used at most once. Every error names the field
// and says what to change.
func (cq *ClusterQueue) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	groupOf := map[string]*field.Path{}
	flavorAt := map[string]*field.Path{}
	for gi, g := range cq.Spec.ResourceGroups {
		gp := spec.Child("resourceGroups").Index(gi)
		for ri, r := range g.CoveredResources {
			if prev, ok := groupOf[string(r)]; ok {
				errs = append(errs, field.Duplicate(gp.Child("coveredResources").Index(ri),
					string(r)+" (already covered by "+prev.String()+"; a resource belongs to one group)"))
			}
			groupOf[string(r)] = gp
		}
		for fi, f := range g.Flavors {
			fp := gp.Child("flavors").Index(fi)
			if prev, ok := flavorAt[f.Name]; ok {
				errs = append(errs, field.Duplicate(fp.Child("name"),
					f.Name+" (already used at "+prev.String()+"; a flavor belongs to one group)"))
			}
			flavorAt[f.Name] = fp
			for qi := range f.Resources {
				errs = append(errs, validateQuota(&f.Resources[qi], fp.Child("resources").Index(qi))...)
			}
		}
	}
	if w := cq.Spec.FairSharing.Weight; w != nil && w.Sign() < 0 {
		errs = append(errs, field.Invalid(spec.Child("fairSharing", "weight"), w.String(), "must not be negative"))
	}
	return errs
}

func validateQuota(q *ResourceQuota, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(name string, v *resource.Quantity) {
		if v != nil && v.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child(name), v.String(), "must not be negative"))
		}
	}
	nonNegative("nominalQuota", &q.NominalQuota)
	nonNegative("borrowingLimit", q.BorrowingLimit)
	nonNegative("lendingLimit", q.LendingLimit)
	if q.LendingLimit != nil && q.LendingLimit.Cmp(q.NominalQuota) > 0 {
		errs = append(errs, field.Invalid(p.Child("lendingLimit"), q.LendingLimit.String(),
			"must not exceed nominalQuota ("+q.NominalQuota.String()+"): lower lendingLimit or raise nominalQuota"))
	}
	return errs
}

// Validate checks what the schema of a ResourceFlavor cannot: its node
// labels, tolerations and topology levels become the node selector,
// tolerations and label keys of admitted pods, so each must be what the
// Pod API accepts, or every job admitted on the flavor would fail to start.
func (rf *ResourceFlavor) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for k, v := range rf.Spec.NodeLabels {
		p := spec.Child("nodeLabels").Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p, k, "key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p, v, "value: "+msg))
		}
	}
	for i, t := range rf.Spec.Tolerations {
		errs = append(errs, validateToleration(t, spec.Child("tolerations").Index(i))...)
	}
	for i, l := range rf.Spec.TopologyLevels {
		for _, msg := range validation.IsQualifiedName(l) {
			errs = append(errs, field.Invalid(spec.Child("topologyLevels").Index(i), l, "must be a node label key: "+msg))
		}
	}
	if p := rf.Spec.Provisioning; p != nil && p.Mode == ProvisioningAlways && p.SinglePodJobs == SinglePodJobsAutoscaler {
		errs = append(errs, field.Invalid(spec.Child("provisioning", "singlePodJobs"), p.SinglePodJobs,
			"contradicts mode: Always, which books capacity for every admission: set mode: IfNeeded to leave single-pod jobs to the autoscaler, or remove singlePodJobs to book them"))
	}
	return errs
}

// validateToleration applies the Pod API's rules for one toleration.
func validateToleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "must be Exists when key is empty (tolerate every taint)"))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect,
			[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("tolerationSeconds"), *t.TolerationSeconds, "may be set only with effect NoExecute"))
	}
	return errs
}
