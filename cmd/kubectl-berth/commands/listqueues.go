package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

func newListLocalQueues(e *env) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:     "localqueues [-n NAMESPACE | -A]",
		Aliases: []string{"localqueue", "lq"},
		Short:   "List LocalQueues with their ClusterQueue, pending and admitted counts and stop policy",
		Long: `Lists LocalQueues with the counts berth keeps in their status. -o wide adds
STATUS, the Active condition (Active, or why not: Stopped, ClusterQueueNotFound, ...);
-o json|yaml prints the LocalQueues as a v1 List.`,
		Example: "  kubectl berth list localqueues -A",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return e.listLocalQueues(cmd.Context(), &o, time.Now())
		},
	}
	o.bind(cmd, true)
	return cmd
}

func (e *env) listLocalQueues(ctx context.Context, o *listOptions, now time.Time) error {
	ns, err := o.namespace(e)
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	lqs := &berthv1.LocalQueueList{}
	if err := c.List(ctx, lqs, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing LocalQueues%s: %w", inNamespace(ns), err)
	}
	return o.printListed(e, itemsOf(lqs.Items), "LocalQueue", "LocalQueues", func() *metav1.Table { return localQueueTable(lqs.Items, now) })
}

// localQueueTable is the LocalQueues as a table.
func localQueueTable(items []berthv1.LocalQueue, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"}, {Name: "ClusterQueue", Type: "string"},
		{Name: "Pending", Type: "integer"}, {Name: "Admitted", Type: "integer"},
		{Name: "Stop", Type: "string"}, {Name: "Age", Type: "string"},
		{Name: "Status", Type: "string", Priority: 1},
	}}
	for i := range items {
		q := &items[i]
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{q.Name, q.Spec.ClusterQueue, q.Status.PendingWorkloads, q.Status.AdmittedWorkloads,
				stopText(q.Spec.StopPolicy), ageText(q.CreationTimestamp, now), activeText(q.Status.Conditions)},
			Object: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{ObjectMeta: q.ObjectMeta}},
		})
	}
	return t
}

func newListClusterQueues(e *env) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:     "clusterqueues",
		Aliases: []string{"clusterqueue", "cq"},
		Short:   "List ClusterQueues with their cohort, counts, fair-share standing and status",
		Long: `Lists ClusterQueues with the counts berth keeps in their status and, from
berth's visibility API, their fair-share standing in the cohort:
WEIGHTED-SHARE (what the queue borrows over its weight; the lowest is
served first) and CQS-AHEAD (queues with pending work served before it).
Reading the standing needs get on clusterqueues/pendingworkloads
(berth-visibility-clusterqueue-viewer); without it the columns show "?".
-o wide adds the queueing strategy and stop policy; -o json|yaml prints the
ClusterQueues as a v1 List.`,
		Example: "  kubectl berth list clusterqueues -o wide",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return e.listClusterQueues(cmd.Context(), &o, time.Now())
		},
	}
	o.bind(cmd, false)
	return cmd
}

func (e *env) listClusterQueues(ctx context.Context, o *listOptions, now time.Time) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	cqs := &berthv1.ClusterQueueList{}
	if err := c.List(ctx, cqs); err != nil {
		return fmt.Errorf("listing ClusterQueues: %w", err)
	}
	if o.output == "json" || o.output == "yaml" {
		objs := make([]any, 0, len(cqs.Items))
		for i := range cqs.Items {
			q := &cqs.Items[i]
			q.APIVersion, q.Kind = berthv1.GroupVersion.String(), "ClusterQueue"
			objs = append(objs, q)
		}
		return printList(e.streams.Out, o.output, objs)
	}
	standing := e.standings(ctx, cqs.Items)
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"}, {Name: "Cohort", Type: "string"},
		{Name: "Pending", Type: "integer"}, {Name: "Admitted", Type: "integer"},
		{Name: "Weighted-Share", Type: "string"}, {Name: "CQs-Ahead", Type: "string"},
		{Name: "Status", Type: "string"}, {Name: "Age", Type: "string"},
		{Name: "Strategy", Type: "string", Priority: 1}, {Name: "Stop", Type: "string", Priority: 1},
	}}
	for i := range cqs.Items {
		q := &cqs.Items[i]
		share, ahead := "?", "?"
		if s, ok := standing[q.Name]; ok {
			share, ahead = s.WeightedShare, fmt.Sprint(s.ClusterQueuesAhead)
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{q.Name, orNone(q.Spec.Cohort), q.Status.PendingWorkloads, q.Status.AdmittedWorkloads,
				share, ahead, activeText(q.Status.Conditions), ageText(q.CreationTimestamp, now),
				orNone(string(q.Spec.QueueingStrategy)), stopText(q.Spec.StopPolicy)},
			Object: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{ObjectMeta: q.ObjectMeta}},
		})
	}
	return o.printTable(e, t, "ClusterQueues", false)
}

// standings reads each ClusterQueue's fair-share standing. The first
// failure is warned about and ends the reads: it is the same for every
// queue (no permission, no API).
func (e *env) standings(ctx context.Context, cqs []berthv1.ClusterQueue) map[string]visv1.FairShare {
	out := map[string]visv1.FairShare{}
	if len(cqs) == 0 {
		return out
	}
	v, err := e.visibility()
	for i := range cqs {
		if err != nil {
			break
		}
		var s *visv1.PendingWorkloadsSummary
		if s, err = v.clusterQueueStanding(ctx, cqs[i].Name); err == nil {
			out[cqs[i].Name] = s.FairShare
		}
	}
	if err != nil {
		fmt.Fprintf(e.streams.ErrOut, "warning: fair-share standing unknown: %v\n", err)
	}
	return out
}

// activeText is a queue's Active condition in one word: Active, or the
// reason it is not.
func activeText(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, berthv1.ConditionActive)
	switch {
	case c == nil:
		return "Unknown"
	case c.Status == metav1.ConditionTrue:
		return "Active"
	case c.Reason != "":
		return c.Reason
	}
	return "Inactive"
}

// stopText is a queue's stop policy, None when unset.
func stopText(p berthv1.StopPolicy) string {
	if p == "" {
		return string(berthv1.StopPolicyNone)
	}
	return string(p)
}
