package commands

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func newListHeadroom(e *env) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:     "headroom [-n NAMESPACE | -A]",
		Aliases: []string{"headroompolicies", "headroompolicy", "hp"},
		Short:   "List HeadroomPolicies: the warm headroom kept for serving workloads, and how much of it is available now",
		Long: `Lists HeadroomPolicies with what berth keeps in their status: KEPT, the
replicas' worth of capacity the sizing keeps now, and AVAILABLE, how much
of it fits on Ready headroom nodes at this moment (less while the
autoscaler restores what replicas took), how it is kept (CapacityBuffer
or Placeholder) and STATUS, the Ready condition (Kept, or why not:
NoHeadroomNodes, ReplicasDoNotTolerate, ...). -o wide adds the target's
replicas and, per topology domain, kept/available; -o json|yaml prints
the policies as a v1 List. docs/headroom.md describes them.`,
		Example: "  kubectl berth list headroom -A -o wide",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return e.listHeadroom(cmd.Context(), &o, time.Now())
		},
	}
	o.bind(cmd, true)
	return cmd
}

func (e *env) listHeadroom(ctx context.Context, o *listOptions, now time.Time) error {
	ns, err := o.namespace(e)
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	list := &berthv1.HeadroomPolicyList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing HeadroomPolicies%s: %w", inNamespace(ns), err)
	}
	return o.printListed(e, itemsOf(list.Items), "HeadroomPolicy", "HeadroomPolicies", func() *metav1.Table { return headroomTable(list.Items, now) })
}

// headroomTable is the policies as a table.
func headroomTable(policies []berthv1.HeadroomPolicy, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"}, {Name: "Target", Type: "string"}, {Name: "ClusterQueue", Type: "string"},
		{Name: "Mode", Type: "string"}, {Name: "Kept", Type: "integer"}, {Name: "Available", Type: "integer"},
		{Name: "Mechanism", Type: "string"}, {Name: "Status", Type: "string"}, {Name: "Age", Type: "string"},
		{Name: "Replicas", Type: "integer", Priority: 1}, {Name: "Domains", Type: "string", Priority: 1},
	}}
	for i := range policies {
		hp := &policies[i]
		st := hp.Status
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{hp.Name, hp.Spec.TargetRef.Kind + "/" + hp.Spec.TargetRef.Name, orNone(st.ClusterQueue), string(hp.Spec.Sizing.Mode),
				st.DesiredReplicas, st.AvailableReplicas, orNone(st.Mechanism), readyText(st.Conditions), ageText(hp.CreationTimestamp, now),
				st.Replicas, domainsText(st.Domains)},
			Object: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{ObjectMeta: hp.ObjectMeta}},
		})
	}
	return t
}

// readyText is a policy's Ready condition in a word: Kept, or why not.
func readyText(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, "Ready")
	if c == nil {
		return "Unknown"
	}
	return c.Reason
}

// domainsText is each domain's kept/available headroom, "-" for none; a
// domain without a name (no topology level) is "all".
func domainsText(domains []berthv1.HeadroomDomain) string {
	parts := make([]string, 0, len(domains))
	for _, d := range domains {
		name := d.Name
		if name == "" {
			name = "all"
		}
		parts = append(parts, fmt.Sprintf("%s=%d/%d", name, d.Replicas, d.Available))
	}
	return orNone(strings.Join(parts, ","))
}
