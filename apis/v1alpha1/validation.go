package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
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
