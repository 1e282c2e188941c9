package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kcmControllers is what a Full plane's kube-controller-manager runs: what
// Jobs and fake nodes need (job, node-lifecycle to lift the not-ready taint,
// taint-eviction and pod GC for lost or deleted nodes, garbage collection),
// namespaces and service accounts so namespaced tests look like a cluster,
// ResourceClaims for pods that use ResourceClaimTemplates (DRA), the
// finalizer of PodGroups that no running pod uses any more (skipped by
// kube-controller-manager unless the GenericWorkload gate is on), and the workload controllers the job integrations build on (JobSet on
// Jobs, LeaderWorkerSet on StatefulSets, the demo on Deployments). Cloud,
// volume, certificate and endpoint controllers are left out: nothing here
// uses them and each costs watches on a 2-core machine.
const kcmControllers = "job-controller,cronjob-controller,ttl-after-finished-controller," +
	"node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller," +
	"garbage-collector-controller,namespace-controller,serviceaccount-controller," +
	"serviceaccount-token-controller,root-ca-certificate-publisher-controller," +
	"clusterrole-aggregation-controller,replicaset-controller,deployment-controller," +
	"statefulset-controller,disruption-controller,resourceclaim-controller," +
	"podgroup-protection-controller"

// kwokPodCIDR is where kwok allocates fake pod IPs; it is kept clear of
// envtest's service range (10.0.0.0/24), which kwok's default overlaps.
const kwokPodCIDR = "10.244.0.0/16"

// probeNodeName names the node Start creates and deletes to prove that kwok
// and the node-lifecycle controller work together.
const probeNodeName = "berth-controlplane-probe"

// nodeComponent is one of the processes a Full plane adds.
type nodeComponent struct {
	name Component
	args *argList
	env  []string
	// health is the URL whose 200 means the component is ready, served on
	// port.
	health string
	port   int
}

// portTries is how often the node components are started on new ports
// when one of theirs was taken before the component bound it.
const portTries = 3

// startNodeComponents starts kube-controller-manager, kube-scheduler and kwok
// together, waits until all report healthy, then proves the node path end to
// end with a probe node.
func (p *Plane) startNodeComponents(ctx context.Context, opts Options) error {
	for try := 1; ; try++ {
		started := len(p.procs)
		err := p.startNodeComponentsOnce(ctx, opts)
		if err == nil || try == portTries || !errors.Is(err, errPortTaken) {
			return err
		}
		// Another process (another plane's component) took a port between
		// freePort and the bind: start them again, on new ports.
		for _, proc := range p.procs[started:] {
			if serr := proc.stop(0); serr != nil {
				return errors.Join(err, serr)
			}
		}
		p.procs = p.procs[:started]
	}
}

// startNodeComponentsOnce starts the node components once, on new ports.
func (p *Plane) startNodeComponentsOnce(ctx context.Context, opts Options) error {
	comps, err := p.nodeComponents(opts)
	if err != nil {
		return err
	}
	waits := make([]func(context.Context) error, 0, len(comps))
	for _, c := range comps {
		if err := c.args.override(opts.ExtraArgs[c.name]); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		path, err := binaryPath(p.BinDir, c.name)
		if err != nil {
			return err
		}
		proc, err := startProcess(c.name, path, c.args.strings(), c.env, p.LogPath(c.name), syscall.SIGKILL)
		if err != nil {
			return err
		}
		p.procs = append(p.procs, proc)
		waits = append(waits, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeoutCause(ctx, opts.StartTimeout,
				fmt.Errorf("timed out after %s", opts.StartTimeout))
			defer cancel()
			return proc.waitFor(ctx, "healthy", proc.ownProbe(c.port, healthProbe(c.health)))
		})
	}
	if err := firstError(ctx, waits); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, opts.StartTimeout,
		fmt.Errorf("timed out after %s", opts.StartTimeout))
	defer cancel()
	if err := p.probeNodeLifecycle(ctx); err != nil {
		return fmt.Errorf("probe node %s never became Ready and untainted: %w\n%s\n%s",
			probeNodeName, err, logTail(p.LogPath(Kwok)), logTail(p.LogPath(KubeControllerManager)))
	}
	return nil
}

// nodeComponents returns the command lines of the Full plane's components,
// before ExtraArgs.
func (p *Plane) nodeComponents(opts Options) ([]nodeComponent, error) {
	certDir := p.Env.ControlPlane.APIServer.CertDir
	caPath := filepath.Join(p.Dir, "apiserver-ca.crt")
	if err := os.WriteFile(caPath, p.Env.ControlPlane.APIServer.CA, 0o600); err != nil {
		return nil, fmt.Errorf("write apiserver CA: %w", err)
	}
	stages, err := kwokStages(p.BinDir, opts.KwokConfigPaths)
	if err != nil {
		return nil, err
	}
	if len(opts.KwokConfigPaths) == 0 {
		faults, err := writeFaultStages(filepath.Join(p.Dir, "kwok-fault-stages"))
		if err != nil {
			return nil, err
		}
		stages = append(stages, faults...)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	kcm := newArgList().
		add("kubeconfig", p.Kubeconfig).
		add("leader-elect", "false").
		add("bind-address", "127.0.0.1").
		add("secure-port", strconv.Itoa(ports[0])).
		add("controllers", kcmControllers).
		// The key the apiserver verifies service-account tokens with, so the
		// token controller can mint tokens that work, and the CA that the
		// kube-root-ca.crt ConfigMaps publish.
		add("service-account-private-key-file", filepath.Join(certDir, "sa-signer.key")).
		add("root-ca-file", caPath).
		// On a loaded 2-core machine kwok's lease renewals can lag; a long
		// grace period keeps the node-lifecycle controller from tainting a
		// healthy fake node NotReady in the middle of a suite.
		add("node-monitor-grace-period", "5m").
		// The default 20 QPS throttles the Job controller under bursts.
		add("kube-api-qps", "100").
		add("kube-api-burst", "200")
	sched := newArgList().
		add("kubeconfig", p.Kubeconfig).
		add("leader-elect", "false").
		add("bind-address", "127.0.0.1").
		add("secure-port", strconv.Itoa(ports[1]))
	kwok := newArgList().
		add("kubeconfig", p.Kubeconfig).
		add("manage-all-nodes", "false").
		add("manage-nodes-with-annotation-selector", FakeNodeAnnotation+"="+FakeNodeAnnotationValue).
		add("server-address", "127.0.0.1:"+strconv.Itoa(ports[2])).
		// Renew node leases like a kubelet, so the node-lifecycle controller
		// never declares a quiet fake node lost mid-test.
		add("node-lease-duration-seconds", "40").
		add("cidr", kwokPodCIDR)
	for _, s := range stages {
		kwok.add("config", s)
	}
	return []nodeComponent{
		{name: KubeControllerManager, args: kcm, health: fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), port: ports[0]},
		{name: KubeScheduler, args: sched, health: fmt.Sprintf("https://127.0.0.1:%d/readyz", ports[1]), port: ports[1]},
		// kwok also reads $KWOK_WORKDIR/kwok.yaml if it exists; point it at
		// the plane so a developer's ~/.kwok cannot change the stages.
		{name: Kwok, args: kwok, env: []string{"KWOK_WORKDIR=" + filepath.Join(p.Dir, "kwok")},
			health: fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[2]), port: ports[2]},
	}, nil
}

// kwokStages returns the Stage files to give kwok: the explicit ones, or the
// set build.sh installs next to the kwok binary.
func kwokStages(binDir string, explicit []string) ([]string, error) {
	if len(explicit) > 0 {
		return explicit, nil
	}
	dir := filepath.Join(binDir, "kwok-stages")
	stages, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("kwok stages: %w", err)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no kwok stages in %s: run %s kwok", dir, buildScript)
	}
	sort.Strings(stages)
	return stages, nil
}

// firstError runs waits concurrently and returns the first failure, which
// cancels the others: one component crashing should fail Start at once, not
// after the others' timeouts, and only its error is the root cause.
func firstError(ctx context.Context, waits []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for _, w := range waits {
		wg.Go(func() {
			if err := w(ctx); err != nil {
				once.Do(func() { first = err })
				cancel(err)
			}
		})
	}
	wg.Wait()
	return first
}

// probeNodeLifecycle creates a kwok node, waits until it is Ready and its
// not-ready taint is gone (kwok and kube-controller-manager both work), and
// deletes it again so tests start with no nodes.
func (p *Plane) probeNodeLifecycle(ctx context.Context) error {
	c, err := client.New(p.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        probeNodeName,
		Annotations: map[string]string{FakeNodeAnnotation: FakeNodeAnnotationValue},
	}}
	if err := c.Create(ctx, node); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := WaitForNodeReady(ctx, c, probeNodeName); err != nil {
		return err
	}
	if err := c.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return poll(ctx, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// poll calls cond every pollInterval until it returns true or ctx ends. A
// condition error is remembered, not fatal, since the apiserver may be
// briefly unavailable; the last one is reported if ctx ends first.
func poll(ctx context.Context, cond func(context.Context) (bool, error)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %w)", context.Cause(ctx), last)
			}
			return context.Cause(ctx)
		case <-ticker.C:
		}
	}
}

// describeTaints renders taints for error messages.
func describeTaints(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		parts = append(parts, t.ToString())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
