package headroom

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// room is one headroom node's free capacity.
type room corev1.ResourceList

// fits says whether reqs fit in r.
func (r room) fits(reqs corev1.ResourceList) bool {
	for name, q := range reqs {
		if free, ok := r[name]; !q.IsZero() && (!ok || free.Cmp(q) < 0) {
			return false
		}
	}
	return true
}

// take takes reqs from r.
func (r room) take(reqs corev1.ResourceList) {
	for name, q := range reqs {
		free := r[name]
		free.Sub(q)
		r[name] = free
	}
}

// headroomRooms are the free capacities of clusterQueue's Ready,
// schedulable headroom nodes in a domain (all of them without a level):
// allocatable less what the pods bound there request, placeholders
// excepted, whose room is the headroom itself.
func (r *Reconciler) headroomRooms(ctx context.Context, clusterQueue, level, domain string) ([]room, error) {
	match := client.MatchingLabels{berthv1.HeadroomLabel: clusterQueue}
	if level != "" {
		match[level] = domain
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, match); err != nil {
		return nil, fmt.Errorf("listing headroom nodes: %w", err)
	}
	var rooms []room
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		var pods corev1.PodList
		if err := r.reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
			return nil, fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
		}
		free := room(n.Status.Allocatable.DeepCopy())
		for j := range pods.Items {
			p := &pods.Items[j]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Labels[PlaceholderLabel] != "" {
				continue
			}
			free.take(jobs.PodRequests(&p.Spec))
		}
		rooms = append(rooms, free)
	}
	return rooms, nil
}

// fitReplicas is how many whole replicas of t, up to want, fit in rooms,
// each pod first fit.
func fitReplicas(rooms []room, t target, want int32) int32 {
	var n int32
	for n < want {
		trial := make([]room, len(rooms))
		for i := range rooms {
			trial[i] = room(corev1.ResourceList(rooms[i]).DeepCopy())
		}
		if !placeReplica(trial, t) {
			break
		}
		rooms = trial
		n++
	}
	return n
}

// placeReplica places every pod of one replica of t in rooms, first fit.
func placeReplica(rooms []room, t target) bool {
	for _, s := range t.shapes {
		reqs := jobs.PodRequests(&s.template.Spec)
		for range s.count {
			placed := false
			for _, r := range rooms {
				if r.fits(reqs) {
					r.take(reqs)
					placed = true
					break
				}
			}
			if !placed {
				return false
			}
		}
	}
	return true
}

// nodeReady says whether n's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// measure sets each domain's available headroom and records the
// policy's series; before is the status the reconcile started from.
func (r *Reconciler) measure(ctx context.Context, hp *berthv1.HeadroomPolicy, t target, before []berthv1.HeadroomDomain) error {
	hp.Status.AvailableReplicas = 0
	prev := map[string]berthv1.HeadroomDomain{}
	for _, d := range before {
		prev[d.Name] = d
	}
	if r.metrics != nil {
		r.metrics.ForgetHeadroom(hp.Namespace, hp.Name)
	}
	for i := range hp.Status.Domains {
		d := &hp.Status.Domains[i]
		rooms, err := r.headroomRooms(ctx, hp.Status.ClusterQueue, t.level, d.Name)
		if err != nil {
			return err
		}
		d.Available = fitReplicas(rooms, t, d.Replicas)
		hp.Status.AvailableReplicas += d.Available
		var taken int32
		if p, ok := prev[d.Name]; ok && d.Replicas >= p.Replicas && d.Available < p.Available {
			taken = p.Available - d.Available
		}
		if r.metrics != nil {
			r.metrics.SetHeadroom(hp.Namespace, hp.Name, hp.Status.ClusterQueue, d.Name, d.Replicas, d.Available, taken)
		}
	}
	return nil
}
