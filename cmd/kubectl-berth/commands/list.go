package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// listOptions are the flags every list command shares.
type listOptions struct {
	allNamespaces bool
	output        string
}

func (o *listOptions) bind(cmd *cobra.Command, namespaced bool) {
	if namespaced {
		cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the objects of every namespace")
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "wide (more columns), json or yaml (a v1 List)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// validate refuses an output the command cannot write, before the cluster
// is asked anything.
func (o *listOptions) validate() error {
	switch o.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q: use wide, json or yaml", o.output)
}

// namespace is the namespace to list in: "" with -A.
func (o *listOptions) namespace(e *env) (string, error) {
	if o.allNamespaces {
		return "", nil
	}
	return e.namespace()
}

func newList(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "list",
		Short: "List Workloads with their place in line, LocalQueues, ClusterQueues or HeadroomPolicies",
	}
	root.AddCommand(newListWorkloads(e), newListLocalQueues(e), newListClusterQueues(e), newListHeadroom(e))
	return root
}

func newListWorkloads(e *env) *cobra.Command {
	var (
		o      listOptions
		cq, lq string
	)
	cmd := &cobra.Command{
		Use:     "workloads [-n NAMESPACE | -A] [--clusterqueue CQ] [--localqueue LQ]",
		Aliases: []string{"workload", "wl"},
		Short:   "List Workloads: their job, queue, status and, pending, their position and why they wait",
		Long: `Lists berth's Workloads, one per gang, with the job each stands for, its
queues and its status (Pending, Booking, Admitted, Evicting, Finished,
Deactivated, GaveUp). A pending Workload's POSITION in its ClusterQueue
(0: admitted next) and REASON come from berth's visibility API, read per
LocalQueue, so a tenant who may view their namespace sees their own line.
Rows are ordered by ClusterQueue, then by position, then by name.
-o wide adds the position in the LocalQueue, the priority, what it is
short of (FLAVOR/RESOURCE REQUESTED>AVAILABLE), its placement (flavor and
topology domain) or planned booking, the booking's state and the message.
-o json|yaml prints a v1 List of the rows (see docs/cli.md).`,
		Example: `  kubectl berth list workloads -n research
  kubectl berth list workloads -A --clusterqueue training -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			items, err := e.listWorkloads(cmd.Context(), &o, cq, lq)
			if err != nil {
				return err
			}
			return o.printWorkloads(e, items, time.Now())
		},
	}
	o.bind(cmd, true)
	cmd.Flags().StringVar(&cq, "clusterqueue", "", "only the Workloads of this ClusterQueue")
	cmd.Flags().StringVar(&lq, "localqueue", "", "only the Workloads submitted to this LocalQueue")
	return cmd
}

// listWorkloads reads the Workloads and their LocalQueues, and the line of
// every LocalQueue that holds pending ones.
func (e *env) listWorkloads(ctx context.Context, o *listOptions, cq, lq string) ([]workloadItem, error) {
	ns, err := o.namespace(e)
	if err != nil {
		return nil, err
	}
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Workloads%s: %w", inNamespace(ns), err)
	}
	queues, err := localQueueClusterQueues(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	var picked []*berthv1.Workload
	for i := range wls.Items {
		wl := &wls.Items[i]
		if lq != "" && wl.Spec.QueueName != lq {
			continue
		}
		if cq != "" && clusterQueueOf(wl, queues) != cq {
			continue
		}
		picked = append(picked, wl)
	}
	lines, unknown := e.pendingLines(ctx, picked)
	items := make([]workloadItem, 0, len(picked))
	for _, wl := range picked {
		lqKey := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}
		var pending *visv1.PendingWorkload
		if p, ok := lines[types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}]; ok {
			pending = &p
		}
		it := newWorkloadItem(wl, queues[lqKey], pending)
		it.PendingUnknown = pending == nil && it.Status == statusPending && unknown[lqKey]
		items = append(items, it)
	}
	sortItems(items)
	return items, nil
}

// localQueueClusterQueues maps each LocalQueue of the namespace ("": all)
// to its ClusterQueue.
func localQueueClusterQueues(ctx context.Context, c client.Client, ns string) (map[types.NamespacedName]string, error) {
	lqs := &berthv1.LocalQueueList{}
	if err := c.List(ctx, lqs, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing LocalQueues%s: %w", inNamespace(ns), err)
	}
	out := make(map[types.NamespacedName]string, len(lqs.Items))
	for _, q := range lqs.Items {
		out[types.NamespacedName{Namespace: q.Namespace, Name: q.Name}] = q.Spec.ClusterQueue
	}
	return out, nil
}

// clusterQueueOf is the ClusterQueue a Workload holds quota of, else the
// one its LocalQueue submits to.
func clusterQueueOf(wl *berthv1.Workload, queues map[types.NamespacedName]string) string {
	if a := wl.Status.Admission; a != nil && a.ClusterQueue != "" {
		return a.ClusterQueue
	}
	return queues[types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}]
}

// pendingLines reads the line of every LocalQueue with a pending Workload
// among wls, keyed by Workload. A line that cannot be read is warned about
// on stderr and reported in unknown: the list still shows the rest.
func (e *env) pendingLines(ctx context.Context, wls []*berthv1.Workload) (map[types.NamespacedName]visv1.PendingWorkload, map[types.NamespacedName]bool) {
	var queues []types.NamespacedName
	for _, wl := range wls {
		k := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}
		if st, _, _ := workloadStatus(wl); st == statusPending && !slices.Contains(queues, k) {
			queues = append(queues, k)
		}
	}
	lines := map[types.NamespacedName]visv1.PendingWorkload{}
	unknown := map[types.NamespacedName]bool{}
	if len(queues) == 0 {
		return lines, unknown
	}
	v, err := e.visibility()
	for _, q := range queues {
		var line *visv1.PendingWorkloadsSummary
		if err == nil {
			line, err = v.localQueueLine(ctx, q.Namespace, q.Name)
		}
		if err != nil {
			fmt.Fprintf(e.streams.ErrOut, "warning: positions in LocalQueue %s unknown: %v\n", describeKey(q), err)
			unknown[q] = true
			if v != nil {
				err = nil // the next LocalQueue may be readable
			}
			continue
		}
		for _, it := range line.Items {
			lines[types.NamespacedName{Namespace: it.Namespace, Name: it.Name}] = it
		}
	}
	return lines, unknown
}

// sortItems orders rows by ClusterQueue, then pending ones by their
// position (the order berth admits them), then by namespace and name.
func sortItems(items []workloadItem) {
	slices.SortStableFunc(items, func(a, b workloadItem) int {
		if c := strings.Compare(a.ClusterQueue, b.ClusterQueue); c != 0 {
			return c
		}
		switch {
		case a.Pending != nil && b.Pending != nil:
			if c := a.Pending.PositionInClusterQueue - b.Pending.PositionInClusterQueue; c != 0 {
				return int(c)
			}
		case a.Pending != nil:
			return -1
		case b.Pending != nil:
			return 1
		}
		if c := strings.Compare(a.Metadata.Namespace, b.Metadata.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
}

// workloadColumns are list workloads' columns; those of priority 1 are
// shown with -o wide.
var workloadColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"}, {Name: "Job", Type: "string"},
	{Name: "LocalQueue", Type: "string"}, {Name: "ClusterQueue", Type: "string"},
	{Name: "Status", Type: "string"}, {Name: "Position", Type: "string"},
	{Name: "Reason", Type: "string"}, {Name: "Age", Type: "string"},
	{Name: "Position-in-LocalQueue", Type: "string", Priority: 1}, {Name: "Priority", Type: "integer", Priority: 1},
	{Name: "Shortfall", Type: "string", Priority: 1}, {Name: "Placement", Type: "string", Priority: 1},
	{Name: "Booking", Type: "string", Priority: 1}, {Name: "Message", Type: "string", Priority: 1},
}

// workloadTable is the table of items.
func workloadTable(items []workloadItem, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: workloadColumns}
	for i := range items {
		it := items[i]
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{it.Metadata.Name, jobText(it.Job), orNone(it.LocalQueue), orNone(it.ClusterQueue),
				it.Status, positionText(it, false), orNone(it.Reason), ageText(it.Metadata.CreationTimestamp, now),
				positionText(it, true), it.Priority, shortfallText(pendingShortfalls(it)), placementText(it),
				bookingText(it), orNone(oneLine(it.Message))},
			// The object gives the printer the NAMESPACE of -A.
			Object: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{ObjectMeta: it.Metadata}},
		})
	}
	return t
}

func pendingShortfalls(it workloadItem) []visv1.Shortfall {
	if it.Pending == nil {
		return nil
	}
	return it.Pending.Shortfalls
}

// printWorkloads writes the items as a table, or as a v1 List of them.
func (o *listOptions) printWorkloads(e *env, items []workloadItem, now time.Time) error {
	if o.output == "json" || o.output == "yaml" {
		objs := make([]any, 0, len(items))
		for _, it := range items {
			objs = append(objs, it)
		}
		return printList(e.streams.Out, o.output, objs)
	}
	return o.printTable(e, workloadTable(items, now), "Workloads", true)
}

// printTable writes a table with kubectl's printer, or says on stderr,
// as kubectl does, that there is nothing to list. namespaced objects get a
// NAMESPACE column with -A.
func (o *listOptions) printTable(e *env, t *metav1.Table, what string, namespaced bool) error {
	if len(t.Rows) == 0 {
		where := ""
		if namespaced && o.allNamespaces {
			where = " in any namespace"
		} else if ns, err := e.namespace(); namespaced && err == nil {
			where = " in namespace " + ns
		}
		_, err := fmt.Fprintf(e.streams.ErrOut, "No %s found%s.\n", what, where)
		return err
	}
	p := printers.NewTablePrinter(printers.PrintOptions{Wide: o.output == "wide", WithNamespace: namespaced && o.allNamespaces})
	if err := p.PrintObj(t, e.streams.Out); err != nil {
		return fmt.Errorf("printing the table: %w", err)
	}
	return nil
}

// printList writes objs as a v1 List in json or yaml, with kubectl's
// printers.
func printList(w io.Writer, output string, objs []any) error {
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		raw, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("writing %T as JSON: %w", obj, err)
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: raw})
	}
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if output == "yaml" {
		p = &printers.YAMLPrinter{}
	}
	if err := p.PrintObj(list, w); err != nil {
		return fmt.Errorf("printing the list: %w", err)
	}
	return nil
}

// printListed prints listed objects as o asks: for -o json|yaml a v1
// List of them as kind (of berth.dev/v1alpha1), else the table.
func (o *listOptions) printListed(e *env, items []client.Object, kind, what string, table func() *metav1.Table) error {
	if o.output == "json" || o.output == "yaml" {
		objs := make([]any, 0, len(items))
		for _, obj := range items {
			obj.GetObjectKind().SetGroupVersionKind(berthv1.GroupVersion.WithKind(kind))
			objs = append(objs, obj)
		}
		return printList(e.streams.Out, o.output, objs)
	}
	return o.printTable(e, table(), what, true)
}

// itemsOf are pointers to a list's items, as objects.
func itemsOf[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// inNamespace is " in namespace ns", or nothing for every namespace.
func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}
