// Package fakeapi builds the API a reconciler sees in a unit test: a
// controller-runtime fake client with berth's scheme and the status
// subresources the real API server has, interceptors that make chosen calls
// fail, and an event recorder that keeps what it was told. Reconcilers are
// then called directly, with no manager, cache or API server.
//
// A fake client is not an API server: it runs no admission webhooks, no
// CEL or OpenAPI validation, no RBAC, no garbage collection and no watches.
// What depends on those stays in the control-plane suites (test/integration,
// test/e2e). Nothing here is global: every call builds a new scheme and
// client, so tests may run in parallel.
package fakeapi

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Scheme returns a new scheme with the built-in Kubernetes types, berth's
// API and the types berth's controllers read or create (JobSet,
// LeaderWorkerSet, ProvisioningRequest, and the CustomResourceDefinitions
// whose metadata berth watches), as the manager's scheme has them.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for name, add := range map[string]func(*runtime.Scheme) error{
		"Kubernetes":          clientgoscheme.AddToScheme,
		"apiextensions":       apiextensionsv1.AddToScheme,
		"berth":               berthv1.AddToScheme,
		"JobSet":              jobsetv1.AddToScheme,
		"LeaderWorkerSet":     lwsv1.AddToScheme,
		"ProvisioningRequest": autoscalingv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("registering %s types: %w", name, err)
		}
	}
	return s, nil
}

// statusObjects are the kinds whose status is a subresource on the real
// API server: a plain Update or Patch leaves their status alone, and
// Status().Patch changes only the status. Pods and the other built-in
// kinds berth writes status of are listed too.
func statusObjects() []client.Object {
	return []client.Object{
		&berthv1.Workload{}, &berthv1.LocalQueue{}, &berthv1.ClusterQueue{}, &berthv1.ResourceFlavor{},
		&berthv1.CapacityPool{}, &berthv1.NotificationPolicy{}, &berthv1.ClusterNotificationPolicy{}, &berthv1.HeadroomPolicy{},
		&autoscalingv1.ProvisioningRequest{}, &jobsetv1.JobSet{}, &lwsv1.LeaderWorkerSet{},
		&batchv1.Job{}, &corev1.Pod{}, &corev1.Node{},
	}
}

// Builder returns a fake client builder with berth's scheme, the status
// subresources and objs. Tests add indexes (WithIndex) or interceptors
// (WithInterceptorFuncs) before Build.
func Builder(objs ...client.Object) (*fake.ClientBuilder, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	return fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(statusObjects()...).WithObjects(objs...), nil
}

// New returns a fake client holding objs, or fails the test's setup.
func New(t interface {
	Helper()
	Fatalf(format string, args ...any)
}, objs ...client.Object) client.WithWatch {
	t.Helper()
	b, err := Builder(objs...)
	if err != nil {
		t.Fatalf("building the fake client: %v", err)
	}
	return b.Build()
}

// Verb names a client call an interceptor can fail.
type Verb string

// Verbs a Failing client fails; SubResourcePatch is Status().Patch and
// SubResourceUpdate Status().Update.
const (
	Get               Verb = "get"
	List              Verb = "list"
	Create            Verb = "create"
	Update            Verb = "update"
	Patch             Verb = "patch"
	Delete            Verb = "delete"
	SubResourcePatch  Verb = "patch status"
	SubResourceUpdate Verb = "update status"
)

// Failure makes calls of one verb on one kind fail. An empty Kind fails
// the verb on every kind; Err, when set, is returned instead of an
// internal server error that says it was injected (for example a
// NotFound or a Conflict).
type Failure struct {
	Verb Verb
	Kind string
	Err  error
}

// Failing wraps c so that the calls failures name return errors; other
// calls reach c. The interceptor is the one controller-runtime ships, so
// what fails is exactly what a reconciler sends.
func Failing(c client.WithWatch, failures ...Failure) client.WithWatch {
	fail := func(v Verb, obj runtime.Object) error {
		kind := kindOf(c, obj)
		for _, f := range failures {
			if f.Verb != v || (f.Kind != "" && f.Kind != kind) {
				continue
			}
			if f.Err != nil {
				return f.Err
			}
			return apierrors.NewInternalError(fmt.Errorf("%s %s: injected API failure", v, kind))
		}
		return nil
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := fail(Get, obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := fail(List, list); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := fail(Create, obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := fail(Update, obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := fail(Patch, obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := fail(Delete, obj); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := fail(SubResourcePatch, obj); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := fail(SubResourceUpdate, obj); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

// kindOf names obj's kind ("Workload", "PodList" → "Pod"); the empty
// string when the scheme does not know it.
func kindOf(c client.Client, obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return ""
	}
	if meta.IsListType(obj) {
		return trimList(gvk)
	}
	return gvk.Kind
}

func trimList(gvk schema.GroupVersionKind) string {
	const suffix = "List"
	if n := len(gvk.Kind); n > len(suffix) && gvk.Kind[n-len(suffix):] == suffix {
		return gvk.Kind[:n-len(suffix)]
	}
	return gvk.Kind
}

// Event is one event a Recorder was told.
type Event struct {
	// Regarding is the kind/namespace/name of the object the event is
	// about; Related the same for the secondary object, or empty.
	Regarding, Related string
	// Type is Normal or Warning.
	Type, Reason, Action string
	// Note is the formatted message.
	Note string
}

// Recorder is an events.EventRecorder that keeps the events it is told.
// It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Eventf implements events.EventRecorder.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	e := Event{Regarding: refOf(regarding), Related: refOf(related), Type: eventtype, Reason: reason, Action: action,
		Note: fmt.Sprintf(note, args...)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of the events recorded so far, in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Reasons returns the reasons of the events recorded so far, in order:
// what most table cases compare.
func (r *Recorder) Reasons() []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Reason)
	}
	return out
}

// refOf names an object "Kind namespace/name" from its type meta, or its Go
// type's name when the type meta is empty (typed objects read from a
// client).
func refOf(o runtime.Object) string {
	if o == nil {
		return ""
	}
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.Indirect(reflect.ValueOf(o)).Type().Name()
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return kind
	}
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}
