package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/test/controlplane"
)

// GPUPlane describes the full plane most e2e and reliability suites share:
// controller-manager, scheduler and kwok GPU nodes, the job operators they
// need, and berth.
type GPUPlane struct {
	// Nodes is how many Ready 8-GPU kwok nodes to create, named
	// "h200-<i>", each with NodeLabels.
	Nodes      int
	NodeLabels map[string]string
	// Operators are started beside berth; their CRDs are installed.
	Operators []Operator
	// CRDPaths are more CRDs to install (e.g. JobSetCRD()).
	CRDPaths []string
	// ExtraArgs adds command-line flags per component (see
	// controlplane.Options.ExtraArgs), e.g. feature gates.
	ExtraArgs map[controlplane.Component][]string
	// PodPolicies installs berth's pod admission policies
	// (InstallPodPolicies) before berth starts, so that the API server
	// gates queued pods and checks their edits, and the pod webhooks are
	// only called for what needs berth. Without them the plane runs the
	// webhook path.
	PodPolicies bool
	// Berth configures berth's manager. The full-plane suites leave
	// Berth.Setup.Parts nil: they show the whole product, every part of
	// it at once.
	Berth BerthOptions
}

// StartGPUPlane starts the plane p describes and returns once its nodes
// are Ready, its operators run and berth serves its webhooks. The plane is
// stopped again if any of it fails to start.
func StartGPUPlane(ctx context.Context, p GPUPlane) (*Env, error) {
	crds := append([]string(nil), p.CRDPaths...)
	for _, o := range p.Operators {
		paths, err := OperatorCRDs(ctx, o)
		if err != nil {
			return nil, err
		}
		crds = append(crds, paths...)
	}
	env, err := StartWith(ctx, StartOptions{Full: true, CRDPaths: crds, ExtraArgs: p.ExtraArgs})
	if err != nil {
		return nil, err
	}
	if err := env.startGPUPlane(ctx, p); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return env, nil
}

func (e *Env) startGPUPlane(ctx context.Context, p GPUPlane) error {
	for i := range p.Nodes {
		node := controlplane.GPUNode(fmt.Sprintf("h200-%d", i), 8, p.NodeLabels)
		if err := e.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		if err := controlplane.WaitForNodeReady(ctx, e.Client, node.Name); err != nil {
			return fmt.Errorf("waiting for node %s: %w", node.Name, err)
		}
	}
	for _, o := range p.Operators {
		if err := e.StartOperator(ctx, o); err != nil {
			return fmt.Errorf("starting the %s operator: %w", o.Name, err)
		}
	}
	if p.PodPolicies {
		if err := InstallPodPolicies(ctx, e.Client); err != nil {
			return err
		}
	}
	if _, err := e.StartBerth(p.Berth); err != nil {
		return fmt.Errorf("starting berth: %w", err)
	}
	return nil
}

// GenericWorkloadArgs turn on kube-scheduler's gang scheduling on a plane:
// the GenericWorkload feature gate on kube-apiserver, kube-scheduler and
// kube-controller-manager, and the scheduling.k8s.io/v1beta1 API (beta
// APIs are off by default) that serves PodGroups. gates are more feature
// gates to turn on beside it on all three (e.g. "WorkloadWithJob", which
// lets the Job controller make each Job's PodGroup).
func GenericWorkloadArgs(gates ...string) map[controlplane.Component][]string {
	gate := "--feature-gates=GenericWorkload=true"
	for _, g := range gates {
		gate += "," + g + "=true"
	}
	return map[controlplane.Component][]string{
		controlplane.KubeAPIServer:         {gate, "--runtime-config=scheduling.k8s.io/v1beta1=true"},
		controlplane.KubeScheduler:         {gate},
		controlplane.KubeControllerManager: {gate},
	}
}

// CleanOptions configure CleanNamespace.
type CleanOptions struct {
	// Owners are the kinds whose controllers create the pods, deleted
	// first or they would replace them; nil means batch Jobs.
	Owners []client.Object
	// Finalizers are removed from the pods left, e.g. a test's own
	// finalizer that keeps pods terminating.
	Finalizers []string
	// Timeout bounds the wait for the pods to go; zero means 90 s.
	Timeout time.Duration
}

// AllOwners are the kinds whose controllers create pods in the suites, for
// CleanOptions.Owners of a plane that runs the JobSet and LeaderWorkerSet
// operators.
func AllOwners() []client.Object {
	return []client.Object{&jobsetv1.JobSet{}, &lwsv1.LeaderWorkerSet{}, &appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &batchv1.Job{}}
}

// CleanNamespace deletes the owners of pods in ns (in the background),
// then its pods at once, and waits until no pod is left. Suites whose specs
// share nodes call it when a spec ends: a pod left running would hold the
// GPUs the next spec needs.
func (e *Env) CleanNamespace(ctx context.Context, ns string, o CleanOptions) error {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	owners := o.Owners
	if owners == nil {
		owners = []client.Object{&batchv1.Job{}}
	}
	for _, kind := range owners {
		if err := e.Client.DeleteAllOf(ctx, kind, client.InNamespace(ns), bg); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the %T objects of %s: %w", kind, ns, err)
		}
	}
	if err := e.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the pods of %s: %w", ns, err)
	}
	if o.Timeout == 0 {
		o.Timeout = 90 * time.Second
	}
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := e.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, fmt.Errorf("listing the pods of %s: %w", ns, err)
		}
		left = left[:0]
		for i := range pods.Items {
			if err := e.removeFinalizers(ctx, &pods.Items[i], o.Finalizers); err != nil {
				return false, err
			}
			left = append(left, pods.Items[i].Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the pods of %s to go (left: %v): %w", ns, left, err)
	}
	return nil
}

// removeFinalizers removes the finalizers from a pod that has them.
func (e *Env) removeFinalizers(ctx context.Context, pod *corev1.Pod, finalizers []string) error {
	base := pod.DeepCopy()
	changed := false
	for _, f := range finalizers {
		changed = controllerutil.RemoveFinalizer(pod, f) || changed
	}
	if !changed {
		return nil
	}
	if err := e.Client.Patch(ctx, pod, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizers %v from pod %s/%s: %w", finalizers, pod.Namespace, pod.Name, err)
	}
	return nil
}
