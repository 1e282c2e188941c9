package visibility

import (
	"context"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

func TestConvertOptions(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    visv1.PendingWorkloadOptions
		wantErr bool
	}{
		{"", visv1.PendingWorkloadOptions{}, false},
		{"offset=3&limit=10", visv1.PendingWorkloadOptions{Offset: 3, Limit: 10}, false},
		{"offset=-1", visv1.PendingWorkloadOptions{}, true},
		{"limit=ten", visv1.PendingWorkloadOptions{}, true},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var got visv1.PendingWorkloadOptions
		err = convertOptions(&q, &got, nil)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%q: got %+v, %v; want %+v, error %v", tc.query, got, err, tc.want, tc.wantErr)
		}
	}
}

// engine is a fixed answer standing in for the scheduler.
type engine struct {
	serving bool
	page    admission.PendingPage
	queues  map[string]bool
	asked   []admission.PendingQuery
}

func (e *engine) Serving() bool { return e.serving }
func (e *engine) Pending(q admission.PendingQuery) (admission.PendingPage, bool) {
	e.asked = append(e.asked, q)
	return e.page, e.queues[q.ClusterQueue]
}

func TestPendingGet(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := berthv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "idle"}},
		&berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "team"}, Spec: berthv1.LocalQueueSpec{ClusterQueue: "busy"}},
	).Build()
	page := admission.PendingPage{Total: 1, Items: []admission.PendingWorkload{{Key: admission.WorkloadKey{Namespace: "ns", Name: "w"},
		Explanation: admission.Explanation{Reason: admission.InsufficientQuota, Message: "short"}}}}
	for _, tc := range []struct {
		name       string
		namespaced bool
		queue      string
		opts       visv1.PendingWorkloadOptions
		serving    bool
		check      func(error) bool
		wantItems  int
		wantQuery  admission.PendingQuery
	}{
		{"a ClusterQueue", false, "busy", visv1.PendingWorkloadOptions{Offset: 2}, true, nil, 1,
			admission.PendingQuery{ClusterQueue: "busy", Offset: 2, Limit: visv1.DefaultLimit}},
		{"a LocalQueue, through its ClusterQueue", true, "team", visv1.PendingWorkloadOptions{Limit: 5}, true, nil, 1,
			admission.PendingQuery{ClusterQueue: "busy", Namespace: "ns", LocalQueue: "team", Limit: 5}},
		{"a queue with nothing pending", false, "idle", visv1.PendingWorkloadOptions{}, true, nil, 1,
			admission.PendingQuery{ClusterQueue: "idle", Limit: visv1.DefaultLimit}},
		{"an unknown ClusterQueue", false, "nope", visv1.PendingWorkloadOptions{}, true, apierrors.IsNotFound, 0, admission.PendingQuery{}},
		{"an unknown LocalQueue", true, "nope", visv1.PendingWorkloadOptions{}, true, apierrors.IsNotFound, 0, admission.PendingQuery{}},
		{"too large a page", false, "busy", visv1.PendingWorkloadOptions{Limit: visv1.MaxLimit + 1}, true, apierrors.IsBadRequest, 0, admission.PendingQuery{}},
		{"not the leader", false, "busy", visv1.PendingWorkloadOptions{}, false, apierrors.IsServiceUnavailable, 0, admission.PendingQuery{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &engine{serving: tc.serving, page: page, queues: map[string]bool{"busy": true}}
			p := &pending{namespaced: tc.namespaced, engine: e, reader: reader}
			ctx := context.Background()
			if tc.namespaced {
				ctx = genericrequest.WithNamespace(ctx, "ns")
			}
			obj, err := p.Get(ctx, tc.queue, &tc.opts)
			if tc.check != nil {
				if err == nil || !tc.check(err) {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(e.asked) != 1 || e.asked[0] != tc.wantQuery {
				t.Fatalf("asked the engine %+v, want %+v", e.asked, tc.wantQuery)
			}
			s := obj.(*visv1.PendingWorkloadsSummary)
			if tc.queue == "idle" {
				if len(s.Items) != 0 || s.Total != 0 {
					t.Fatalf("a queue the engine has nothing for lists %+v", s)
				}
				return
			}
			if len(s.Items) != tc.wantItems || s.Items[0].Reason != "InsufficientQuota" || s.Items[0].Name != "w" {
				t.Fatalf("summary %+v", s)
			}
		})
	}
}
