package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// explainKind is a kind explain takes: the kind of the Workload's owner,
// with the API group that serves it ("" for a pod group, whose pods own
// the Workload, and for a Workload itself). Deployments and StatefulSets
// (group apps) are found through their pods, which own their replicas'
// Workloads.
type explainKind struct {
	kind, group string
}

// explainKinds are the kinds of controllers/jobs (docs/jobs.md and
// docs/serving.md), and the Workload, by the names a user may type.
var explainKinds = map[string]explainKind{
	"job": {"Job", "batch"}, "jobs": {"Job", "batch"}, "job.batch": {"Job", "batch"},
	"jobset": {"JobSet", "jobset.x-k8s.io"}, "jobsets": {"JobSet", "jobset.x-k8s.io"},
	"leaderworkerset": {"LeaderWorkerSet", "leaderworkerset.x-k8s.io"}, "leaderworkersets": {"LeaderWorkerSet", "leaderworkerset.x-k8s.io"},
	"lws":        {"LeaderWorkerSet", "leaderworkerset.x-k8s.io"},
	"deployment": {"Deployment", "apps"}, "deployments": {"Deployment", "apps"}, "deploy": {"Deployment", "apps"}, "deployment.apps": {"Deployment", "apps"},
	"statefulset": {"StatefulSet", "apps"}, "statefulsets": {"StatefulSet", "apps"}, "sts": {"StatefulSet", "apps"}, "statefulset.apps": {"StatefulSet", "apps"},
	"pytorchjob": {"PyTorchJob", "kubeflow.org"}, "pytorchjobs": {"PyTorchJob", "kubeflow.org"},
	"mpijob": {"MPIJob", "kubeflow.org"}, "mpijobs": {"MPIJob", "kubeflow.org"},
	"raycluster": {"RayCluster", "ray.io"}, "rayclusters": {"RayCluster", "ray.io"},
	"rayjob": {"RayJob", "ray.io"}, "rayjobs": {"RayJob", "ray.io"}, "rayjob.ray.io": {"RayJob", "ray.io"},
	"trainjob": {"TrainJob", "trainer.kubeflow.org"}, "trainjobs": {"TrainJob", "trainer.kubeflow.org"}, "trainjob.trainer.kubeflow.org": {"TrainJob", "trainer.kubeflow.org"},
	"podgroup": {podGroupKind, ""}, "podgroups": {podGroupKind, ""}, "pod": {podGroupKind, ""}, "pods": {podGroupKind, ""},
	"workload": {"Workload", ""}, "workloads": {"Workload", ""}, "workload.berth.dev": {"Workload", ""}, "bwl": {"Workload", ""},
}

// explainKindNames are what completion offers and errors name.
var explainKindNames = []string{"deployment", "job", "jobset", "leaderworkerset", "lws", "mpijob", "podgroup", "pytorchjob", "raycluster", "rayjob", "statefulset",
	"trainjob", "workload"}

func newExplain(e *env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "explain KIND/NAME [-n NAMESPACE]",
		Short: "Say where a job's Workload stands: its queue, place in line and why it waits, or where it runs",
		Long: `Finds the Workload of a job (job, jobset, leaderworkerset or lws, podgroup —
a group of pods labelled berth.dev/pod-group, or a single labelled pod —,
deployment, statefulset, rayjob, raycluster, pytorchjob, mpijob or trainjob labelled berth.dev/queue-name, or a workload by
name) and says in plain words where it stands: its queues
and status; if it is pending, its position in its ClusterQueue and
LocalQueue, why it waits, what it is short of per flavor (needs X, Y
available), whether preemption could make room and the ClusterQueue's
fair-share standing; if it is admitted or booking capacity, where its gang
is placed (flavors, topology domain) and its ProvisioningRequest's state;
if it finished or was deactivated, that, and what to do. A
LeaderWorkerSet has a Workload per replica: each is explained. So has a
Deployment (each replica's pod owns one) and a StatefulSet (each ordinal's
pod owns one, or, annotated berth.dev/gang: set, the set owns one for all
its pods); a header first sums the replicas up — wanted, admitted, pending
and their most common reason, pods berth does not queue — and, for a
Deployment's rolling update, how far it is and whether berth's swap
(berth.dev/swap-for) is under way. A Deployment or StatefulSet that is not
labelled berth.dev/queue-name is not queued: explain says how to label it.
-o json|yaml prints a v1 List of the Workloads and, for a pending one, its
LocalQueue's PendingWorkloadsSummary reduced to its own entry.`,
		Example: `  kubectl berth explain job/train -n research
  kubectl berth explain lws/serve -o yaml
  kubectl berth explain deployment/web -n serving
  kubectl berth explain sts/kv-cache -n serving`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: explainKindCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := parseExplainTarget(args)
			if err != nil {
				return err
			}
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output %q: use json or yaml, or no -o for the explanation", output)
			}
			return e.explain(cmd.Context(), k, name, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print the Workloads and their pending entries instead")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// explainKindCompletion completes KIND/ with the kinds; the name is the
// user's to type.
func explainKindCompletion(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 || strings.Contains(toComplete, "/") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]string, 0, len(explainKindNames))
	for _, k := range explainKindNames {
		out = append(out, k+"/")
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// parseExplainTarget reads KIND/NAME, or KIND NAME as kubectl also takes.
func parseExplainTarget(args []string) (explainKind, string, error) {
	kind, name := args[0], ""
	if len(args) == 2 {
		name = args[1]
	} else {
		var ok bool
		if kind, name, ok = strings.Cut(args[0], "/"); !ok {
			return explainKind{}, "", fmt.Errorf("%q: name what to explain as KIND/NAME, e.g. job/train", args[0])
		}
	}
	k, ok := explainKinds[strings.ToLower(kind)]
	if !ok {
		return explainKind{}, "", fmt.Errorf("%q is not a kind explain knows: use %s (or pod, a group of one)",
			kind, strings.Join(explainKindNames, ", "))
	}
	if name == "" || strings.Contains(name, "/") {
		return explainKind{}, "", fmt.Errorf("%q: the name is missing or has a slash; use KIND/NAME, e.g. job/train", strings.Join(args, " "))
	}
	return k, name, nil
}

// explained is what explain knows of one Workload.
type explained struct {
	wl   *berthv1.Workload
	item workloadItem
	// line is the LocalQueue's summary, Items reduced to the Workload's
	// entry; nil when it is not pending or the line could not be read.
	line *visv1.PendingWorkloadsSummary
	// lineErr says why the line could not be read.
	lineErr error
	// replica is the replica of a Deployment or StatefulSet the Workload
	// stands for ("replica pod NAME", "the whole set"); "" for other kinds.
	replica string
}

func (e *env) explain(ctx context.Context, k explainKind, name, output string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	ns, err := e.namespace()
	if err != nil {
		return err
	}
	var set *servingSet
	var wls []*berthv1.Workload
	if k.serving() {
		if set, err = findServing(ctx, c, k, ns, name); err != nil {
			return err
		}
		wls = set.workloads
	} else if wls, err = findWorkloads(ctx, c, k, ns, name); err != nil {
		return err
	}
	all := make([]explained, 0, len(wls))
	for _, wl := range wls {
		ex := e.explainWorkload(ctx, c, wl)
		if set != nil {
			set.describe(&ex)
		}
		all = append(all, ex)
	}
	if output != "" {
		return printExplained(e, output, all)
	}
	return writeExplanations(e.streams.Out, set, all, time.Now())
}

// findWorkloads reads the Workloads of the named object, oldest first; it
// is an error, saying what to check, when there are none.
func findWorkloads(ctx context.Context, c client.Client, k explainKind, ns, name string) ([]*berthv1.Workload, error) {
	if k.kind == "Workload" {
		wl := &berthv1.Workload{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, wl)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no Workload %s in namespace %s: kubectl berth list workloads -n %s lists them", name, ns, ns)
		}
		if err != nil {
			return nil, fmt.Errorf("reading Workload %s/%s: %w", ns, name, err)
		}
		return []*berthv1.Workload{wl}, nil
	}
	wls := &berthv1.WorkloadList{}
	opts := []client.ListOption{client.InNamespace(ns)}
	if k.kind == podGroupKind {
		opts = append(opts, client.MatchingLabels{berthv1.JobKeyLabel: name})
	}
	if err := c.List(ctx, wls, opts...); err != nil {
		return nil, fmt.Errorf("listing the Workloads of namespace %s: %w", ns, err)
	}
	var out []*berthv1.Workload
	for i := range wls.Items {
		j := jobOf(&wls.Items[i])
		if j.Kind == k.kind && j.Name == name && groupOf(j.APIVersion) == k.group {
			out = append(out, &wls.Items[i])
		}
	}
	if len(out) == 0 {
		what := strings.ToLower(k.kind) + "/" + name
		return nil, fmt.Errorf("%s in namespace %s has no Workload: berth queues only objects labelled %s=LOCALQUEUE; is the name, the namespace (-n) and the label right? (kubectl get %s -n %s --show-labels)",
			what, ns, berthv1.QueueNameLabel, getTarget(k, name), ns)
	}
	sortWorkloads(out)
	return out, nil
}

// sortWorkloads orders Workloads oldest first, then by name.
func sortWorkloads(wls []*berthv1.Workload) {
	slices.SortFunc(wls, func(a, b *berthv1.Workload) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// groupOf is the group of an apiVersion ("" for core).
func groupOf(apiVersion string) string {
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return g
	}
	return ""
}

// getTarget is what `kubectl get` takes to show the object itself.
func getTarget(k explainKind, name string) string {
	if k.kind == podGroupKind {
		return "pods -l " + berthv1.PodGroupLabel + "=" + name
	}
	return strings.ToLower(k.kind) + "." + k.group + " " + name
}

// explainWorkload reads the Workload's LocalQueue and, if it is pending,
// its entry in the LocalQueue's line. What cannot be read is said in the
// explanation rather than failing it: the Workload's own status is still
// worth telling.
func (e *env) explainWorkload(ctx context.Context, c client.Client, wl *berthv1.Workload) explained {
	ex := explained{wl: wl}
	cq := ""
	lq := &berthv1.LocalQueue{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, lq); err == nil {
		cq = lq.Spec.ClusterQueue
	}
	ex.item = newWorkloadItem(wl, cq, nil)
	if ex.item.Status != statusPending || cq == "" {
		return ex
	}
	v, err := e.visibility()
	var line *visv1.PendingWorkloadsSummary
	if err == nil {
		line, err = v.entry(ctx, wl.Namespace, wl.Spec.QueueName, wl.Name)
	}
	if err != nil {
		ex.lineErr = err
		ex.item.PendingUnknown = true
		return ex
	}
	for i := range line.Items {
		if p := line.Items[i]; p.Namespace == wl.Namespace && p.Name == wl.Name {
			ex.item = newWorkloadItem(wl, cq, &p)
			line.Items = []visv1.PendingWorkload{p}
			ex.line = line
			return ex
		}
	}
	// Not in the line: held (a stopped queue), or between requeues. The
	// summary still has the queue's fair-share standing.
	line.Items = nil
	ex.line = line
	return ex
}

// printExplained writes the Workloads, and the lines of the pending ones,
// as a v1 List.
func printExplained(e *env, output string, all []explained) error {
	var objs []any
	for _, ex := range all {
		wl := ex.wl.DeepCopy()
		wl.APIVersion, wl.Kind = berthv1.GroupVersion.String(), "Workload"
		wl.ManagedFields = nil
		objs = append(objs, wl)
		if ex.line != nil && len(ex.line.Items) > 0 {
			s := ex.line.DeepCopy()
			s.APIVersion, s.Kind = visv1.GroupVersion.String(), "PendingWorkloadsSummary"
			s.Namespace, s.Name = wl.Namespace, wl.Spec.QueueName
			objs = append(objs, s)
		}
	}
	return printList(e.streams.Out, output, objs)
}
