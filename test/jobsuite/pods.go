package jobsuite

import (
	"context"
	"fmt"

	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UnboundReason names an unbound pod and says why it waits: its scheduling
// gates, or kube-scheduler's last word on it. Specs put it in their failure
// messages, so a gang that never binds says which side held it.
func UnboundReason(p *corev1.Pod) string {
	if len(p.Spec.SchedulingGates) > 0 {
		gates := make([]string, 0, len(p.Spec.SchedulingGates))
		for _, g := range p.Spec.SchedulingGates {
			gates = append(gates, g.Name)
		}
		return fmt.Sprintf("%s gated by %v", p.Name, gates)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("%s %s: %s", p.Name, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("%s not yet tried by kube-scheduler", p.Name)
}

// Completed polls whether the Job has its Complete condition. While it has
// not, it fails g with the Job's conditions and counts and each of its
// pods' state, so a spec that times out on it says where the Job stands.
func Completed(ctx context.Context, c client.Client, job *batchv1.Job) func(gomega.Gomega) bool {
	return func(g gomega.Gomega) bool {
		fresh := &batchv1.Job{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(gomega.Succeed())
		conds := make([]string, 0, len(fresh.Status.Conditions))
		for _, cond := range fresh.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				return true
			}
			conds = append(conds, fmt.Sprintf("%s=%s %s", cond.Type, cond.Status, cond.Reason))
		}
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace(job.Namespace),
			client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(gomega.Succeed())
		states := make([]string, 0, len(pods.Items))
		for i := range pods.Items {
			states = append(states, podState(&pods.Items[i]))
		}
		g.Expect(false).To(gomega.BeTrue(), "job %s/%s not complete: suspend=%v active=%d succeeded=%d failed=%d conditions %v; pods %v",
			job.Namespace, job.Name, ptr.Deref(fresh.Spec.Suspend, false), fresh.Status.Active, fresh.Status.Succeeded,
			fresh.Status.Failed, conds, states)
		return false
	}
}

// podState is a pod's name, phase and node, or why it is not bound.
func podState(p *corev1.Pod) string {
	if p.Spec.NodeName == "" {
		return UnboundReason(p)
	}
	deleting := ""
	if !p.DeletionTimestamp.IsZero() {
		deleting = ", deleting"
	}
	return fmt.Sprintf("%s %s on %s%s", p.Name, p.Status.Phase, p.Spec.NodeName, deleting)
}
