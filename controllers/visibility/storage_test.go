package visibility

import (
	"context"
	"net/url"
	"slices"
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
		{"workload=ns%2Fw&limit=1", visv1.PendingWorkloadOptions{Limit: 1, Workload: "ns/w"}, false},
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
		{"one workload of a ClusterQueue", false, "busy", visv1.PendingWorkloadOptions{Workload: "ns/w"}, true, nil, 1,
			admission.PendingQuery{ClusterQueue: "busy", Limit: visv1.DefaultLimit, Workload: admission.WorkloadKey{Namespace: "ns", Name: "w"}}},
		{"one workload of a LocalQueue, in its namespace", true, "team", visv1.PendingWorkloadOptions{Workload: "w"}, true, nil, 1,
			admission.PendingQuery{ClusterQueue: "busy", Namespace: "ns", LocalQueue: "team", Limit: visv1.DefaultLimit,
				Workload: admission.WorkloadKey{Namespace: "ns", Name: "w"}}},
		{"a ClusterQueue's workload without its namespace", false, "busy", visv1.PendingWorkloadOptions{Workload: "w"}, true,
			apierrors.IsBadRequest, 0, admission.PendingQuery{}},
		{"a LocalQueue's workload with a namespace", true, "team", visv1.PendingWorkloadOptions{Workload: "other/w"}, true,
			apierrors.IsBadRequest, 0, admission.PendingQuery{}},
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

func TestRedact(t *testing.T) {
	own := admission.WorkloadKey{Namespace: "ns", Name: "mine"}
	other := admission.WorkloadKey{Namespace: "team-b", Name: "theirs"}
	for _, tc := range []struct {
		name             string
		mentions         []admission.WorkloadKey
		wantMessage      string
		wantVictims      []string
		wantPreemptedMsg string
	}{
		{"another namespace's workloads are not named", []admission.WorkloadKey{own, other},
			"waiting behind " + Redacted + " and ns/mine", []string{"ns/mine", Redacted}, "would preempt " + Redacted},
		{"the viewer's own are", []admission.WorkloadKey{own},
			"waiting behind team-b/theirs and ns/mine", []string{"ns/mine", "team-b/theirs"}, "would preempt team-b/theirs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item := visv1.PendingWorkload{Message: "waiting behind team-b/theirs and ns/mine",
				Preemption: visv1.Preemption{Message: "would preempt team-b/theirs", Victims: []string{"ns/mine", "team-b/theirs"}}}
			redact(&item, tc.mentions, "ns")
			if item.Message != tc.wantMessage || item.Preemption.Message != tc.wantPreemptedMsg ||
				!slices.Equal(item.Preemption.Victims, tc.wantVictims) {
				t.Fatalf("got %q, %q, %v; want %q, %q, %v", item.Message, item.Preemption.Message, item.Preemption.Victims,
					tc.wantMessage, tc.wantPreemptedMsg, tc.wantVictims)
			}
		})
	}
}

// TestSummaryRedactsOnlyLocalQueueLines checks that a ClusterQueue's line,
// read by its administrators, keeps every name, and a LocalQueue's does not.
func TestSummaryRedactsOnlyLocalQueueLines(t *testing.T) {
	other := admission.WorkloadKey{Namespace: "team-b", Name: "head"}
	page := admission.PendingPage{Total: 1, Items: []admission.PendingWorkload{{Key: admission.WorkloadKey{Namespace: "ns", Name: "w"},
		Explanation: admission.Explanation{Reason: admission.BlockedByHead, Message: "waiting behind team-b/head", Mentions: []admission.WorkloadKey{other}}}}}
	p := &pending{reader: fake.NewClientBuilder().Build()}
	for viewer, want := range map[string]string{"": "waiting behind team-b/head", "ns": "waiting behind " + Redacted} {
		obj, err := p.summary(context.Background(), page, viewer)
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.(*visv1.PendingWorkloadsSummary).Items[0].Message; got != want {
			t.Errorf("viewer %q: message %q, want %q", viewer, got, want)
		}
	}
}
