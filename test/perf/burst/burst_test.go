package burst

import (
	"context"
	"strings"
	"testing"
	"time"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

func TestGangs(t *testing.T) {
	tests := []struct {
		gangs, maxSize, pods int
		sizes                []int
	}{
		{gangs: 1, maxSize: 4, pods: 1, sizes: []int{1}},
		{gangs: 6, maxSize: 4, pods: 1 + 2 + 3 + 4 + 1 + 2, sizes: []int{1, 2, 3, 4, 1, 2}},
		{gangs: 2000, maxSize: 4, pods: 5000},
		{gangs: 3, maxSize: 1, pods: 3, sizes: []int{1, 1, 1}},
	}
	for _, tt := range tests {
		if got := Pods(tt.gangs, tt.maxSize); got != tt.pods {
			t.Errorf("Pods(%d, %d) = %d, want %d", tt.gangs, tt.maxSize, got, tt.pods)
		}
		for i, want := range tt.sizes {
			if got := GangSize(i, tt.maxSize); got != want {
				t.Errorf("GangSize(%d, %d) = %d, want %d", i, tt.maxSize, got, want)
			}
		}
	}
}

func TestGangPods(t *testing.T) {
	for _, throughBerth := range []bool{false, true} {
		pods := GangPods("ns", 3, 4, throughBerth)
		if len(pods) != 4 {
			t.Fatalf("gang 3 has %d pods, want 4", len(pods))
		}
		for _, p := range pods {
			if p.Labels[GangLabel] != "r00003" {
				t.Errorf("%s: gang label %q", p.Name, p.Labels[GangLabel])
			}
			if q := p.Spec.Containers[0].Resources.Requests[builders.GPU]; q.Value() != 1 {
				t.Errorf("%s requests %s GPUs, want 1", p.Name, q.String())
			}
			_, queued := p.Labels[berthv1.QueueNameLabel]
			group := p.Labels[berthv1.PodGroupLabel]
			count := p.Annotations[berthv1.PodGroupTotalCountAnnotation]
			if throughBerth && (!queued || group != "r00003" || count != "4") {
				t.Errorf("%s through berth: queue %v, group %q, count %q", p.Name, queued, group, count)
			}
			if !throughBerth && (queued || group != "" || count != "") {
				t.Errorf("%s for kube-scheduler alone carries berth's labels: %v %v", p.Name, p.Labels, p.Annotations)
			}
		}
	}
}

func TestGangDeployment(t *testing.T) {
	for _, throughBerth := range []bool{false, true} {
		d := GangDeployment("ns", 3, throughBerth)
		if d.Name != "r00003" || *d.Spec.Replicas != 0 {
			t.Errorf("Deployment %s with %d replicas, want r00003 with none until its scale-up", d.Name, *d.Spec.Replicas)
		}
		if got := d.Spec.Template.Labels[GangLabel]; got != "r00003" || d.Spec.Selector.MatchLabels[GangLabel] != got {
			t.Errorf("pods labelled %q, selected by %v: want the gang's name in both", got, d.Spec.Selector.MatchLabels)
		}
		if q := d.Spec.Template.Spec.Containers[0].Resources.Requests[builders.GPU]; q.Value() != 1 {
			t.Errorf("a replica requests %s GPUs, want 1", q.String())
		}
		// The queue label goes on the Deployment only: berth copies it into
		// the template, as it does for a user's Deployment.
		if _, queued := d.Labels[berthv1.QueueNameLabel]; queued != throughBerth {
			t.Errorf("through berth %v: Deployment labels %v", throughBerth, d.Labels)
		}
		if _, queued := d.Spec.Template.Labels[berthv1.QueueNameLabel]; queued {
			t.Errorf("the template carries the queue label itself: %v", d.Spec.Template.Labels)
		}
	}
}

func TestGangLeaderWorkerSet(t *testing.T) {
	for _, throughBerth := range []bool{false, true} {
		set := GangLeaderWorkerSet("ns", 2, 4, throughBerth)
		if set.Name != "r00002" || *set.Spec.Replicas != 0 || *set.Spec.LeaderWorkerTemplate.Size != 3 {
			t.Errorf("set %s with %d replicas of %d pods, want r00002 with none of 3 until its scale-up",
				set.Name, *set.Spec.Replicas, *set.Spec.LeaderWorkerTemplate.Size)
		}
		tmpl := set.Spec.LeaderWorkerTemplate.WorkerTemplate
		if tmpl.Labels[GangLabel] != "r00002" || set.Spec.LeaderWorkerTemplate.LeaderTemplate != nil {
			t.Errorf("leader and workers from one template labelled %v, want the gang's name", tmpl.Labels)
		}
		if q := tmpl.Spec.Containers[0].Resources.Requests[builders.GPU]; q.Value() != 1 {
			t.Errorf("a pod requests %s GPUs, want 1", q.String())
		}
		if _, queued := set.Labels[berthv1.QueueNameLabel]; queued != throughBerth {
			t.Errorf("through berth %v: set labels %v", throughBerth, set.Labels)
		}
	}
}

// TestRunRejectsBadOptions checks that options that cannot describe a burst
// on free capacity fail before any plane starts, saying what to fix.
func TestRunRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{name: "negative gangs", o: Options{Gangs: -1}, want: "gangs must be at least 1"},
		{name: "empty gangs", o: Options{MaxGangSize: -2}, want: "at least 1 pod"},
		{name: "negative window", o: Options{Window: -time.Second}, want: "must not be negative"},
		{name: "unknown shape", o: Options{Shape: "jobs"}, want: `shape "jobs" is none of [pods deployments leaderworkersets]`},
		{name: "too few nodes", o: Options{Gangs: 100, Nodes: 10}, want: "10 nodes hold 80 GPUs, fewer than the 250 pods need"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestDefaultNodesHoldEveryPodWithSpare(t *testing.T) {
	o := Options{}
	o.defaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.Nodes*gpusPerNode < Pods(o.Gangs, o.MaxGangSize)*9/8 {
		t.Errorf("%d nodes for %d pods leave less than an eighth spare", o.Nodes, Pods(o.Gangs, o.MaxGangSize))
	}
}
