package v1alpha1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func quota(name, nominal string) ResourceQuota {
	return ResourceQuota{Name: corev1.ResourceName(name), NominalQuota: resource.MustParse(nominal)}
}

func qptr(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestClusterQueueValidate(t *testing.T) {
	cases := []struct {
		name   string
		groups []ResourceGroup
		want   []string // substrings, one per expected error; none: valid
	}{
		{
			name: "valid",
			groups: []ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
				Flavors: []FlavorQuotas{{Name: "h200", Resources: []ResourceQuota{quota("nvidia.com/gpu", "8")}}}}},
		},
		{
			name: "negative nominal quota",
			groups: []ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
				Flavors: []FlavorQuotas{{Name: "h200", Resources: []ResourceQuota{quota("nvidia.com/gpu", "-1")}}}}},
			want: []string{"spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"-1\": must not be negative"},
		},
		{
			name: "lending limit above nominal",
			groups: []ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"},
				Flavors: []FlavorQuotas{{Name: "a", Resources: []ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("4"), LendingLimit: qptr("5")}}}}}},
			want: []string{"must not exceed nominalQuota (4)"},
		},
		{
			name: "negative borrowing limit",
			groups: []ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"},
				Flavors: []FlavorQuotas{{Name: "a", Resources: []ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("4"), BorrowingLimit: qptr("-2")}}}}}},
			want: []string{"borrowingLimit: Invalid value: \"-2\""},
		},
		{
			name: "resource and flavor in two groups",
			groups: []ResourceGroup{
				{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []FlavorQuotas{{Name: "a", Resources: []ResourceQuota{quota("cpu", "1")}}}},
				{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []FlavorQuotas{{Name: "a", Resources: []ResourceQuota{quota("cpu", "1")}}}},
			},
			want: []string{"a resource belongs to one group", "a flavor belongs to one group"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cq := &ClusterQueue{Spec: ClusterQueueSpec{ResourceGroups: tc.groups}}
			errs := cq.Validate()
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d", len(errs), errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}
