package notify

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
)

// Options configure failure notifications.
type Options struct {
	// Enabled turns notifications on: berth then also watches the pods it
	// started (status only) and serves the notification policies.
	Enabled bool
	// Namespace is berth's own, where ClusterNotificationPolicies' Secrets
	// live.
	Namespace string
	// Egress says where sinks may be reached; the zero value refuses
	// loopback, link-local, private, CGNAT, unspecified and multicast
	// addresses, and lets Slack sinks post to Slack's hosts only.
	Egress EgressOptions
	// HTTPClient, when set, lends the sinks' client its timeout and its
	// transport's TLS configuration (tests trust their own server's
	// certificate this way); berth's egress rules apply all the same (see
	// Egress.Guard). Nil: a client with Dispatch.Timeout.
	HTTPClient *http.Client
	// Dispatch configures delivery; a zero QueueSize means
	// DefaultDispatchOptions.
	Dispatch DispatchOptions
	// PoliciesPerNamespace caps the NotificationPolicies used per
	// namespace (0: DefaultPoliciesPerNamespace).
	PoliciesPerNamespace int
	// Clock is the notifier's clock (the real one when nil).
	Clock clock.WithTicker
}

// Add wires notifications into mgr: a cache of the pods berth started,
// the Notifier on the pod and Workload informers (run by the leader only),
// and the policy controllers. recorder records the Event sink's events and
// the policies' warnings.
func Add(ctx context.Context, mgr ctrl.Manager, m *metrics.Metrics, recorder events.EventRecorder, o Options) error {
	if !o.Enabled {
		return nil
	}
	if o.Dispatch.QueueSize == 0 {
		o.Dispatch = DefaultDispatchOptions()
	}
	egress := NewEgress(o.Egress)
	httpClient := o.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: o.Dispatch.Timeout}
	}
	httpClient, err := egress.Guard(httpClient)
	if err != nil {
		return fmt.Errorf("building the sinks' HTTP client: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the notifier's clientset: %w", err)
	}
	pods, err := podCache(mgr)
	if err != nil {
		return err
	}
	if err := mgr.Add(pods); err != nil {
		return fmt.Errorf("adding the notifier's pod cache: %w", err)
	}
	n := NewNotifier(pods, mgr.GetClient(), NewEnricher(clientset), m, mgr.GetLogger().WithName("notify"),
		NotifierOptions{Dispatch: o.Dispatch, Clock: o.Clock})
	podInformer, err := pods.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting the notifier's pod informer: %w", err)
	}
	wlInformer, err := mgr.GetCache().GetInformer(ctx, &berthv1.Workload{})
	if err != nil {
		return fmt.Errorf("getting the Workload informer: %w", err)
	}
	if err := n.Register(podInformer, wlInformer); err != nil {
		return err
	}
	if err := mgr.Add(n); err != nil {
		return fmt.Errorf("adding the notifier: %w", err)
	}
	return NewPolicyReconciler(mgr.GetClient(), mgr.GetAPIReader(), n, recorder, PolicyOptions{Namespace: o.Namespace,
		HTTPClient: httpClient, Egress: egress, PerNamespace: o.PoliciesPerNamespace}).Register(ctx, mgr)
}

// podCache caches the pods berth started (labelled with their Workload's
// UID), trimmed to what failure detection reads.
func podCache(mgr ctrl.Manager) (cache.Cache, error) {
	started, err := labels.NewRequirement(berthv1.WorkloadLabel, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("building the notifier's pod selector: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: labels.NewSelector().Add(*started), Transform: trimPod}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the notifier's pod cache: %w", err)
	}
	return c, nil
}

// trimPod keeps what failure detection reads of a pod: its identity and
// labels, node, conditions and container statuses.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions,
			InitContainerStatuses: p.Status.InitContainerStatuses, ContainerStatuses: p.Status.ContainerStatuses},
	}, nil
}
