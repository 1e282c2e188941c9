package builders

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// servingTemplate is the pod template of a serving replica asking for gpus
// GPUs, labelled app: name.
func servingTemplate(name, gpus string) corev1.PodTemplateSpec {
	q := resource.MustParse(gpus)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "server", Image: "registry.invalid/serve:latest",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{GPU: q},
					Limits:   corev1.ResourceList{GPU: q},
				}}},
		},
	}
}

// Deployment is a Deployment of replicas pods of gpus GPUs each, submitted
// to queue (none when empty), rolling with maxUnavailable 0 and maxSurge 1.
func Deployment(namespace, name, queue string, replicas int32, gpus string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: servingTemplate(name, gpus),
		},
	}
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one}}
	if queue != "" {
		d.Labels = map[string]string{berthv1.QueueNameLabel: queue}
	}
	return d
}

// StatefulSet is a StatefulSet of replicas pods of gpus GPUs each,
// submitted to queue (none when empty). whole makes it one gang
// (berth.dev/gang: set, with podManagementPolicy Parallel).
func StatefulSet(namespace, name, queue string, replicas int32, gpus string, whole bool) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:    servingTemplate(name, gpus),
		},
	}
	if queue != "" {
		s.Labels = map[string]string{berthv1.QueueNameLabel: queue}
	}
	if whole {
		s.Annotations = map[string]string{berthv1.GangAnnotation: berthv1.GangSet}
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	}
	return s
}

// HeadroomPool is a CapacityPool of up to four 8-GPU nodes of flavor that
// hold clusterQueue's headroom: labelled (flavorLabels too) and tainted
// berth.dev/headroom=<clusterQueue>, in domain of level.
func HeadroomPool(name, flavor, clusterQueue, level, domain string, flavorLabels map[string]string) *berthv1.CapacityPool {
	labels := map[string]string{level: domain, berthv1.HeadroomLabel: clusterQueue}
	maps.Copy(labels, flavorLabels)
	return &berthv1.CapacityPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.CapacityPoolSpec{Flavor: flavor, MaxNodes: 4, NodeTemplate: berthv1.NodeTemplate{
			Labels:      labels,
			Taints:      []corev1.Taint{{Key: berthv1.HeadroomLabel, Value: clusterQueue, Effect: corev1.TaintEffectNoSchedule}},
			Allocatable: corev1.ResourceList{GPU: resource.MustParse("8")},
		}}}
}
