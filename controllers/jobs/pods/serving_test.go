package pods

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

func ctrlRef(kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
}

func servingObjects() []client.Object {
	queued := map[string]string{berthv1.QueueNameLabel: "team"}
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1", Labels: queued}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "d2"}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", UID: "rs1",
			OwnerReferences: []metav1.OwnerReference{ctrlRef("Deployment", "web", "d1")}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", UID: "rs2"}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "forged", UID: "rs3",
			OwnerReferences: []metav1.OwnerReference{ctrlRef("Deployment", "web", "not-d1")}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain-abc", UID: "rs4",
			OwnerReferences: []metav1.OwnerReference{ctrlRef("Deployment", "plain", "d2")}}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "s1", Labels: queued}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "s2"}},
	}
}

func servingPod(name string, ref metav1.OwnerReference, labels ...string) *corev1.Pod {
	l := map[string]string{berthv1.QueueNameLabel: "team"}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: l, OwnerReferences: []metav1.OwnerReference{ref}}}
}

// TestServingKey: which pods are Deployment or StatefulSet replicas, and
// their gang keys.
func TestServingKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		kind, key string
	}{
		{name: "a Deployment's pod is its own gang", pod: servingPod("web-abc-x", ctrlRef("ReplicaSet", "web-abc", "rs1")),
			kind: DeploymentKind, key: "web-abc-x"},
		{name: "a pod whose name is too long for a label value is keyed by its UID", pod: func() *corev1.Pod {
			p := servingPod(strings.Repeat("w", 64), ctrlRef("ReplicaSet", "web-abc", "rs1"))
			p.UID = "u-long"
			return p
		}(), kind: DeploymentKind, key: "u-long"},
		{name: "a StatefulSet ordinal is its own gang", pod: servingPod("db-1", ctrlRef("StatefulSet", "db", "s1")),
			kind: StatefulSetKind, key: "db-1"},
		{name: "a whole-set pod shares the set's key", pod: servingPod("db-1", ctrlRef("StatefulSet", "db", "s1"), berthv1.GangAnnotation, berthv1.GangSet),
			kind: StatefulSetKind, key: "db-set"},
		{name: "a LeaderWorkerSet's pod is not", pod: servingPod("l-0", ctrlRef("StatefulSet", "l", "s9"), "leaderworkerset.sigs.k8s.io/name", "l")},
		{name: "an unqueued pod is not", pod: func() *corev1.Pod {
			p := servingPod("web-abc-x", ctrlRef("ReplicaSet", "web-abc", "rs1"))
			delete(p.Labels, berthv1.QueueNameLabel)
			return p
		}()},
		{name: "a pod of another group's ReplicaSet is not", pod: servingPod("x", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "ReplicaSet", Name: "r", Controller: ptr.To(true)})},
		{name: "a plain pod is not", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{berthv1.QueueNameLabel: "team"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, key, ok := ServingKey(tc.pod)
			if ok != (tc.kind != "") || kind != tc.kind || key != tc.key {
				t.Errorf("ServingKey = %q %q %v, want %q %q", kind, key, ok, tc.kind, tc.key)
			}
		})
	}
}

// TestValidateServingController: a queued pod created by kube-controller-
// manager is accepted only when its controllers lead, by UID, to a queued
// Deployment or StatefulSet; a tenant's own ReplicaSet gets a refusal that
// says what to do.
func TestValidateServingController(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(servingObjects()...).Build()
	v := Validator{Workloads: jobs.Workloads{Cache: c, API: c}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		user string
		want string
	}{
		{name: "a pod of a queued Deployment's ReplicaSet", pod: servingPod("web-abc-x", ctrlRef("ReplicaSet", "web-abc", "rs1")),
			user: "system:serviceaccount:kube-system:replicaset-controller"},
		{name: "a pod of a queued StatefulSet", pod: servingPod("db-0", ctrlRef("StatefulSet", "db", "s1")),
			user: "system:kube-controller-manager"},
		{name: "a pod of a tenant's own ReplicaSet", pod: servingPod("mine-x", ctrlRef("ReplicaSet", "mine", "rs2")),
			user: "system:kube-controller-manager", want: `its ReplicaSet "mine" is not controlled by a Deployment`},
		{name: "a ReplicaSet naming the Deployment with another UID", pod: servingPod("forged-x", ctrlRef("ReplicaSet", "forged", "rs3")),
			user: "system:kube-controller-manager", want: `the Deployment "web" of its ReplicaSet "forged" does not exist or is not labelled`},
		{name: "a pod of an unqueued Deployment that copies the label", pod: servingPod("plain-abc-x", ctrlRef("ReplicaSet", "plain-abc", "rs4")),
			user: "system:kube-controller-manager", want: `the Deployment "plain" of its ReplicaSet "plain-abc" does not exist or is not labelled`},
		{name: "a ReplicaSet named like the real one with another UID", pod: servingPod("web-abc-y", ctrlRef("ReplicaSet", "web-abc", "rs-other")),
			user: "system:kube-controller-manager", want: `its ReplicaSet "web-abc" does not exist`},
		{name: "a pod of an unqueued StatefulSet", pod: servingPod("cache-0", ctrlRef("StatefulSet", "cache", "s2")),
			user: "system:kube-controller-manager", want: `its StatefulSet "cache" does not exist or is not labelled`},
		{name: "a tenant creating a pod that names the real ReplicaSet", pod: servingPod("web-abc-z", ctrlRef("ReplicaSet", "web-abc", "rs1")),
			user: "tenant", want: "must be created by that controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UserInfo: authnv1.UserInfo{Username: tc.user}}})
			_, err := v.ValidateCreate(ctx, tc.pod)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
}

// TestOrdinal reads a StatefulSet pod's ordinal from its name only.
func TestOrdinal(t *testing.T) {
	for _, tc := range []struct {
		set, pod string
		want     int
		ok       bool
	}{
		{"db", "db-0", 0, true}, {"db", "db-12", 12, true}, {"db", "db-x", 0, false},
		{"db", "db-", 0, false}, {"db", "other-1", 0, false}, {"db", "db-01", 0, false}, {"db", "db-1-2", 0, false},
	} {
		if got, ok := Ordinal(tc.set, tc.pod); got != tc.want || ok != tc.ok {
			t.Errorf("Ordinal(%q, %q) = %d %v, want %d %v", tc.set, tc.pod, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSetSchedulingGroup(t *testing.T) {
	pod := func(ref metav1.OwnerReference, labels map[string]string) *corev1.Pod {
		l := map[string]string{berthv1.QueueNameLabel: "team"}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Labels: l, OwnerReferences: []metav1.OwnerReference{ref}}}
	}
	whole := map[string]string{berthv1.GangAnnotation: berthv1.GangSet}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"a whole-set StatefulSet's pod joins its set's group", pod(ctrlRef("StatefulSet", "db", "s1"), whole), "statefulset-db"},
		{"a StatefulSet ordinal is a gang of one", pod(ctrlRef("StatefulSet", "db", "s1"), nil), ""},
		{"a Deployment replica is a gang of one", pod(ctrlRef("ReplicaSet", "web-abc", "rs1"), whole), ""},
	}
	for _, tt := range tests {
		if got := SetSchedulingGroup(context.Background(), tt.pod); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
