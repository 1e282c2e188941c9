// Command demo runs berth on a local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok GPU nodes, all built from
// Go modules), applies the samples in config/samples, submits GPU training
// Jobs from two teams, and prints each Job's progress as berth holds, admits
// and finishes it, and once, while some wait, `kubectl berth list
// workloads` with their places in line. A second act runs the stand-in autoscaler: a gang that
// must run in one rack, while the free GPUs are split over two racks, waits
// for a node berth books in one rack, then runs with all its pods there. It
// exits 0 once every Job completed. Run it with `make demo`.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/cmd/kubectl-berth/commands"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

const deadline = 5 * time.Minute

func main() {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	// The visibility server's libraries log through klog.
	klog.SetLogger(logr.Discard())
	if err := runWithSignals(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// runWithSignals runs the demo until it ends or is interrupted; stopping
// the control plane happens before main exits.
func runWithSignals() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return run(ctx, os.Stdout)
}

func run(ctx context.Context, out io.Writer) (err error) {
	start := time.Now()
	fmt.Fprintln(out, "starting a local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok")
	env, err := framework.StartWithProvisioning(ctx, framework.StartOptions{Full: true})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	fmt.Fprintf(out, "control plane up in %s (kubeconfig: %s)\n", time.Since(start).Round(100*time.Millisecond), env.Plane.Kubeconfig)

	for i := range 2 {
		node := controlplane.GPUNode(fmt.Sprintf("h200-node-%d", i), 8, nil)
		if err := env.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("creating node: %w", err)
		}
		if err := controlplane.WaitForNodeReady(ctx, env.Client, node.Name); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "two kwok nodes with 8 NVIDIA H200 GPUs each are Ready")
	if _, err := env.StartBerth(framework.BerthOptions{}); err != nil {
		return err
	}
	stopVisibility, err := env.ServeVisibility(ctx)
	if err != nil {
		return err
	}
	// Before the plane: its API server waits for the aggregator's
	// connections to the visibility server.
	defer func() { err = errors.Join(err, stopVisibility()) }()
	fmt.Fprintln(out, "berth is running, with its visibility API behind the API server's aggregator")
	samples := filepath.Join(framework.RepoRoot(), "config", "samples")
	for _, f := range []string{"resourceflavor.yaml", "clusterqueues.yaml", "localqueues.yaml"} {
		if err := apply(ctx, env.Client, filepath.Join(samples, f)); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "applied config/samples: flavor h200; ClusterQueues team-a (8 GPUs, may borrow 8) and team-b (8 GPUs, StrictFIFO) in cohort gpus")

	submitted, err := submit(ctx, env.Client, filepath.Join(samples, "job.yaml"))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "submitted %d jobs; each holds its GPUs for 4s once running\n\n", len(submitted))
	line := func() error { return showLine(ctx, env, out) }
	if err := watch(ctx, env, out, submitted, line); err != nil {
		return err
	}
	return racked(ctx, env, out)
}

// Racked capacity: labels of the second act's nodes and pools.
const (
	rackedPool = "example.com/pool"
	zoneLabel  = "topology.kubernetes.io/zone"
	rackLabel  = "example.com/rack"
)

// racked is the second act: a gang that must run in one rack, while the
// free GPUs are spread over two racks. berth books one new node in the
// rack that needs the fewest, the stand-in autoscaler creates it, and the
// gang runs with both pods in that rack.
func racked(ctx context.Context, env *framework.Env, out io.Writer) error {
	fmt.Fprintln(out, "\n--- act 2: a rack-local gang on capacity provisioned in one rack ---")
	// The stand-in answers as cluster-autoscaler does; its nodes take 3 s
	// to join.
	opts := autoscaler.DefaultOptions()
	opts.RetryInterval, opts.ProvisioningLatency = time.Second, 3*time.Second
	stop, err := env.StartAutoscaler(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	if err := racks(ctx, env, out); err != nil {
		return err
	}
	return rackedGang(ctx, env, out)
}

// racks creates the second act's racks: one Ready 8-GPU node and a
// CapacityPool of two more in each of r1 and r2.
func racks(ctx context.Context, env *framework.Env, out io.Writer) error {
	labels := func(rack string) map[string]string {
		return map[string]string{rackedPool: "racked", zoneLabel: "zone-a", rackLabel: rack}
	}
	for _, rack := range []string{"r1", "r2"} {
		node := controlplane.GPUNode("h200-"+rack+"-existing", 8, labels(rack))
		if err := env.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("creating node: %w", err)
		}
		if err := controlplane.WaitForNodeReady(ctx, env.Client, node.Name); err != nil {
			return err
		}
		template := controlplane.GPUNode("template", 8, labels(rack))
		poolLabels := labels(rack)
		poolLabels[berthv1.CapacityPoolLabel] = "h200-" + rack
		pool := &berthv1.CapacityPool{
			ObjectMeta: metav1.ObjectMeta{Name: "h200-" + rack},
			Spec: berthv1.CapacityPoolSpec{Flavor: "h200-racked", MaxNodes: 2, NodeTemplate: berthv1.NodeTemplate{
				Labels: poolLabels, Allocatable: template.Status.Allocatable,
			}},
		}
		if err := env.Client.Create(ctx, pool); err != nil {
			return fmt.Errorf("creating CapacityPool: %w", err)
		}
	}
	fmt.Fprintln(out, "racks r1 and r2: one Ready 8-GPU node each, and a CapacityPool each that can add 2 more (berth-autoscaler plays the cluster autoscaler)")
	return nil
}

// rackedGang creates the second act's queue and submits its gang, then
// watches it run.
func rackedGang(ctx context.Context, env *framework.Env, out io.Writer) error {
	rf := &berthv1.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "h200-racked"},
		Spec: berthv1.ResourceFlavorSpec{
			NodeLabels:     map[string]string{rackedPool: "racked"},
			TopologyLevels: []string{zoneLabel, rackLabel, corev1.LabelHostname},
			Provisioning:   &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded},
		},
	}
	quota := func(name, q string) berthv1.ResourceQuota {
		return berthv1.ResourceQuota{Name: corev1.ResourceName(name), NominalQuota: resource.MustParse(q)}
	}
	cq := &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "research"},
		Spec: berthv1.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}, ResourceGroups: []berthv1.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{"cpu", "memory", "nvidia.com/gpu"},
			Flavors: []berthv1.FlavorQuotas{{Name: rf.Name, Resources: []berthv1.ResourceQuota{
				quota("cpu", "256"), quota("memory", "4Ti"), quota("nvidia.com/gpu", "32")}}},
		}}},
	}
	lq := &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "research"},
		Spec: berthv1.LocalQueueSpec{ClusterQueue: cq.Name}}
	for _, o := range []client.Object{rf, cq, lq} {
		if err := env.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	fmt.Fprintln(out, "flavor h200-racked (levels zone, rack, host; provisioning IfNeeded) and ClusterQueue research with 32 GPUs")

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pretrain-racked",
			Labels:      map[string]string{berthv1.QueueNameLabel: "research"},
			Annotations: map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: controlplane.RunFor(4 * time.Second)},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "trainer", Image: "registry.example.com/llm/trainer:latest",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{"cpu": resource.MustParse("16"), "memory": resource.MustParse("128Gi"), "nvidia.com/gpu": resource.MustParse("8")},
						Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
					}}}},
			},
		},
	}
	if err := env.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("submitting %s: %w", job.Name, err)
	}
	fmt.Fprintln(out, "submitted team-a/pretrain-racked: 2 pods x 8 GPUs, berth.dev/topology-required: example.com/rack")
	fmt.Fprint(out, "16 GPUs are free, but 8 in each rack: no rack can hold the gang without a new node\n\n")
	if err := watch(ctx, env, out, []*batchv1.Job{job}, nil); err != nil {
		return err
	}
	return placementOf(ctx, env.Client, out, job)
}

// placementOf prints the nodes and racks the job's pods ran on, and fails
// if they were not all in one rack.
func placementOf(ctx context.Context, c client.Client, out io.Writer, job *batchv1.Job) error {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name}); err != nil {
		return fmt.Errorf("listing the job's pods: %w", err)
	}
	racks := map[string]bool{}
	for _, p := range pods.Items {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			return fmt.Errorf("reading node %q of pod %s: %w", p.Spec.NodeName, p.Name, err)
		}
		racks[node.Labels[rackLabel]] = true
		fmt.Fprintf(out, "  pod %s ran on %s in rack %s\n", p.Name, node.Name, node.Labels[rackLabel])
	}
	if len(racks) != 1 {
		return fmt.Errorf("the gang's pods ran in %d racks, want one", len(racks))
	}
	return nil
}

// apply creates every object of a multi-document YAML file.
func apply(ctx context.Context, c client.Client, path string) error {
	objs, err := load(path)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s from %s: %w", o.GetKind(), o.GetName(), path, err)
		}
	}
	return nil
}

func load(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// submit creates three of the sample job (2 pods x 4 GPUs) for team-a and
// two single-pod 8-GPU jobs for team-b.
func submit(ctx context.Context, c client.Client, path string) ([]*batchv1.Job, error) {
	objs, err := load(path)
	if err != nil || len(objs) != 1 {
		return nil, fmt.Errorf("loading the sample job: %w", errors.Join(err, errors.New("expected one Job")))
	}
	var created []*batchv1.Job
	for i := range 5 {
		job := &batchv1.Job{}
		if err := c.Scheme().Convert(objs[0], job, nil); err != nil {
			return nil, fmt.Errorf("converting the sample job: %w", err)
		}
		job.GenerateName = ""
		job.Name = fmt.Sprintf("train-%d", i+1)
		job.Spec.Template.Annotations = controlplane.RunFor(4 * time.Second)
		if i >= 3 {
			job.Namespace = "team-b"
			job.Name = fmt.Sprintf("finetune-%d", i-2)
			one := int32(1)
			job.Spec.Parallelism, job.Spec.Completions = &one, &one
			ctr := &job.Spec.Template.Spec.Containers[0]
			ctr.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("8")
			ctr.Resources.Limits["nvidia.com/gpu"] = resource.MustParse("8")
		}
		if err := c.Create(ctx, job); err != nil {
			return nil, fmt.Errorf("submitting %s/%s: %w", job.Namespace, job.Name, err)
		}
		created = append(created, job)
		time.Sleep(200 * time.Millisecond) // distinct creation order, as users submit
	}
	return created, nil
}

// watch prints every change of a job's state until all completed.
func watch(ctx context.Context, env *framework.Env, out io.Writer, submitted []*batchv1.Job, line func() error) error {
	start := time.Now()
	last := map[string]string{}
	shown := false
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		done := 0
		names := make([]string, 0, len(submitted))
		states := map[string]string{}
		for _, j := range submitted {
			key := j.Namespace + "/" + j.Name
			names = append(names, key)
			st, finished, err := state(ctx, env, j)
			if err != nil {
				return err
			}
			states[key] = st
			if finished {
				done++
			}
		}
		sort.Strings(names)
		held, running := 0, 0
		for _, n := range names {
			if states[n] != last[n] {
				fmt.Fprintf(out, "[%5.1fs] %-20s %s\n", time.Since(start).Seconds(), n, states[n])
				last[n] = states[n]
			}
			if strings.HasPrefix(states[n], "held") {
				held++
			}
			if strings.HasPrefix(states[n], "running") {
				running++
			}
		}
		// Once, while some jobs run and others wait: the line as a user
		// sees it.
		if !shown && held > 0 && running > 0 && line != nil {
			shown = true
			if err := line(); err != nil {
				return err
			}
		}
		if done == len(submitted) {
			fmt.Fprintf(out, "\nall %d jobs completed in %s; no job ever ran with only part of its pods\n", done, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(start) > deadline {
			return fmt.Errorf("jobs did not complete within %s", deadline)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// showLine prints `kubectl berth list workloads -A`: every Workload with
// its place in line and why it waits, as the visibility API serves them.
func showLine(ctx context.Context, env *framework.Env, out io.Writer) error {
	fmt.Fprintln(out, "\n$ kubectl berth list workloads -A    # where each job is in line, and why")
	cmd := commands.NewRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out})
	cmd.SetArgs([]string{"--kubeconfig", env.Plane.Kubeconfig, "list", "workloads", "-A"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		return fmt.Errorf("kubectl berth list workloads: %w", err)
	}
	fmt.Fprintln(out)
	return nil
}

// state describes a job in one line, and whether it completed. A job
// waiting its turn has no reason in its Workload's status: the engine
// serves it, as the visibility API and kubectl berth explain do.
func state(ctx context.Context, env *framework.Env, j *batchv1.Job) (string, bool, error) {
	c := env.Client
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(j), job); err != nil {
		return "", false, fmt.Errorf("reading job: %w", err)
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status == corev1.ConditionTrue && (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) {
			return "finished: " + string(cond.Type), true, nil
		}
	}
	wl := &berthv1.Workload{}
	err := c.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: jobs.WorkloadName("Job", job)}, wl)
	if err != nil {
		return "submitted", false, client.IgnoreNotFound(err)
	}
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		if meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) {
			return "admitted, starting", false, nil
		}
		if cond := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted); cond != nil && cond.Reason == string(berthv1.ReasonWaitingForCapacity) {
			return "quota reserved, waiting for capacity: " + bookingOf(wl), false, nil
		}
		if cond := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved); cond != nil {
			return "held: " + cond.Message, false, nil
		}
		if ex, ok := env.Berth().Scheduler.Explain(lifecycle.KeyOf(wl)); ok && ex.Message != "" {
			return "held: " + ex.Message, false, nil
		}
		return "held: queued", false, nil
	}
	msg := "admitted"
	if cond := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted); cond != nil {
		msg = cond.Message
	}
	return fmt.Sprintf("running %d/%d pods — %s", job.Status.Active, *job.Spec.Parallelism, msg), false, nil
}

// bookingOf describes a workload's capacity booking.
func bookingOf(wl *berthv1.Workload) string {
	p := wl.Status.Provisioning
	if p == nil {
		return "booking"
	}
	msg := fmt.Sprintf("ProvisioningRequest %s (%s) is %s", p.RequestName, p.ClassName, p.State)
	if a := wl.Status.Admission; a != nil && a.Provisioning != nil {
		for _, n := range a.Provisioning.NewNodes {
			msg += fmt.Sprintf("; %d new node(s) in pool %s", n.Nodes, n.Pool)
		}
	}
	if t := p.Topology; t != nil {
		var kv []string
		for i, l := range t.Levels {
			kv = append(kv, l+"="+t.Values[i])
		}
		msg += "; pinned to " + strings.Join(kv, ",")
	}
	return msg
}
