package serving

import (
	"context"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestDefaulters: the queue label (and a StatefulSet's gang label) is
// copied into the pod template, removed from it when the object lost it,
// and no other label of the template changes.
func TestDefaulters(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		template    map[string]string
		want        map[string]string
	}{
		{name: "queue copied, other labels untouched", labels: map[string]string{berthv1.QueueNameLabel: "team", "tier": "x"},
			template: map[string]string{"app": "web"}, want: map[string]string{"app": "web", berthv1.QueueNameLabel: "team"}},
		{name: "template without labels", labels: map[string]string{berthv1.QueueNameLabel: "team"},
			want: map[string]string{berthv1.QueueNameLabel: "team"}},
		{name: "queue changed follows", labels: map[string]string{berthv1.QueueNameLabel: "other"},
			template: map[string]string{"app": "web", berthv1.QueueNameLabel: "team"}, want: map[string]string{"app": "web", berthv1.QueueNameLabel: "other"}},
		{name: "queue removed from the object leaves the template", labels: map[string]string{"app": "web"},
			template: map[string]string{"app": "web", berthv1.QueueNameLabel: "team"}, want: map[string]string{"app": "web"}},
	} {
		t.Run("Deployment/"+tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			d.Spec.Template.Labels = maps.Clone(tc.template)
			if err := (DeploymentDefaulter{}).Default(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(d.Spec.Template.Labels, tc.want) {
				t.Errorf("template labels = %v, want %v", d.Spec.Template.Labels, tc.want)
			}
		})
		t.Run("StatefulSet/"+tc.name, func(t *testing.T) {
			s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			s.Spec.Template.Labels = maps.Clone(tc.template)
			if err := (StatefulSetDefaulter{}).Default(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(s.Spec.Template.Labels, tc.want) {
				t.Errorf("template labels = %v, want %v", s.Spec.Template.Labels, tc.want)
			}
		})
	}
	whole := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{berthv1.QueueNameLabel: "team"},
		Annotations: map[string]string{berthv1.GangAnnotation: berthv1.GangSet}}}
	if err := (StatefulSetDefaulter{}).Default(context.Background(), whole); err != nil {
		t.Fatal(err)
	}
	if got := whole.Spec.Template.Labels[berthv1.GangAnnotation]; got != berthv1.GangSet {
		t.Errorf("whole-set template gang label = %q, want %q", got, berthv1.GangSet)
	}
	delete(whole.Annotations, berthv1.GangAnnotation)
	if err := (StatefulSetDefaulter{}).Default(context.Background(), whole); err != nil {
		t.Fatal(err)
	}
	if _, ok := whole.Spec.Template.Labels[berthv1.GangAnnotation]; ok {
		t.Errorf("gang label kept after the annotation was removed: %v", whole.Spec.Template.Labels)
	}
}

// TestValidators: the queue name must name a LocalQueue; berth.dev/gang
// takes "set" only, with podManagementPolicy Parallel.
func TestValidators(t *testing.T) {
	for _, tc := range []struct {
		name        string
		queue       string
		annotations map[string]string
		policy      appsv1.PodManagementPolicyType
		want        string
	}{
		{name: "valid queue", queue: "team"},
		{name: "queue of another namespace", queue: "ns/team", want: "must be the name of a LocalQueue in the job's own namespace"},
		{name: "uppercase queue", queue: "Team", want: "must be the name of a LocalQueue"},
		{name: "whole set, parallel", queue: "team", annotations: map[string]string{berthv1.GangAnnotation: "set"}, policy: appsv1.ParallelPodManagement},
		{name: "whole set, ordered", queue: "team", annotations: map[string]string{berthv1.GangAnnotation: "set"},
			policy: appsv1.OrderedReadyPodManagement, want: "needs spec.podManagementPolicy Parallel"},
		{name: "whole set, policy defaulted", queue: "team", annotations: map[string]string{berthv1.GangAnnotation: "set"},
			want: "needs spec.podManagementPolicy Parallel"},
		{name: "unknown gang value", queue: "team", annotations: map[string]string{berthv1.GangAnnotation: "ordinal"}, policy: appsv1.ParallelPodManagement,
			want: `Unsupported value: "ordinal"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Name: "x", Labels: map[string]string{berthv1.QueueNameLabel: tc.queue}, Annotations: tc.annotations}
			sts := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{PodManagementPolicy: tc.policy}}
			check := func(kind string, err error) {
				t.Helper()
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("%s refused: %v", kind, err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("%s: got %v, want %q", kind, err, tc.want)
				}
			}
			_, err := StatefulSetValidator{}.ValidateCreate(context.Background(), sts)
			check("StatefulSet create", err)
			_, err = StatefulSetValidator{}.ValidateUpdate(context.Background(), sts, sts)
			check("StatefulSet update", err)
			if _, gang := tc.annotations[berthv1.GangAnnotation]; !gang {
				_, err = DeploymentValidator{}.ValidateCreate(context.Background(), &appsv1.Deployment{ObjectMeta: meta})
				check("Deployment create", err)
			}
		})
	}
}
