package fakeapi

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestFailing(t *testing.T) {
	wl := func() *berthv1.Workload {
		return &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl"}}
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "workloads"}, "wl")
	cases := []struct {
		name     string
		failures []Failure
		call     func(c client.Client) error
		wantErr  func(error) bool
	}{
		{"no failure: the call reaches the fake", nil,
			func(c client.Client) error { return c.Get(t.Context(), client.ObjectKeyFromObject(wl()), wl()) },
			func(err error) bool { return err == nil }},
		{"a failing verb and kind is an internal error", []Failure{{Verb: Get, Kind: "Workload"}},
			func(c client.Client) error { return c.Get(t.Context(), client.ObjectKeyFromObject(wl()), wl()) },
			func(err error) bool {
				return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "injected")
			}},
		{"another kind is not failed", []Failure{{Verb: Get, Kind: "Pod"}},
			func(c client.Client) error { return c.Get(t.Context(), client.ObjectKeyFromObject(wl()), wl()) },
			func(err error) bool { return err == nil }},
		{"a list is failed by the kind of its items", []Failure{{Verb: List, Kind: "Workload"}},
			func(c client.Client) error { return c.List(t.Context(), &berthv1.WorkloadList{}) },
			apierrors.IsInternalError},
		{"the error given is returned", []Failure{{Verb: Delete, Err: notFound}},
			func(c client.Client) error { return c.Delete(t.Context(), wl()) },
			func(err error) bool { return errors.Is(err, notFound) }},
		{"a status patch fails apart from a patch", []Failure{{Verb: SubResourcePatch}},
			func(c client.Client) error {
				w := wl()
				return c.Patch(t.Context(), w, client.MergeFrom(w.DeepCopy()))
			},
			func(err error) bool { return err == nil }},
		{"a status update fails", []Failure{{Verb: SubResourceUpdate, Kind: "Workload"}},
			func(c client.Client) error { return c.Status().Update(t.Context(), wl()) },
			apierrors.IsInternalError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Failing(New(t, wl()), tc.failures...)
			if err := tc.call(c); !tc.wantErr(err) {
				t.Errorf("error = %v", err)
			}
		})
	}
}

func TestRecorder(t *testing.T) {
	r := &Recorder{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	owner := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}
	r.Eventf(pod, owner, corev1.EventTypeWarning, "Held", "Release", "pod %s is %s", "p", "held")
	r.Eventf(&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"}}, nil, corev1.EventTypeNormal, "Ready", "Check", "ok")
	want := []Event{
		{Regarding: "Pod ns/p", Related: "Job ns/j", Type: corev1.EventTypeWarning, Reason: "Held", Action: "Release", Note: "pod p is held"},
		{Regarding: "ResourceFlavor h200", Type: corev1.EventTypeNormal, Reason: "Ready", Action: "Check", Note: "ok"},
	}
	if got := r.Events(); !slices.Equal(got, want) {
		t.Errorf("events = %+v, want %+v", got, want)
	}
	if got := r.Reasons(); !slices.Equal(got, []string{"Held", "Ready"}) {
		t.Errorf("reasons = %v", got)
	}
}
