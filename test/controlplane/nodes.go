package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FakeNodeAnnotation and FakeNodeAnnotationValue mark a Node as one that the
// plane's kwok plays the kubelet for. kwok manages only nodes annotated so,
// which keeps it away from nodes a test registers for other purposes.
const (
	FakeNodeAnnotation      = "kwok.x-k8s.io/node"
	FakeNodeAnnotationValue = "fake"
)

// GPUResource is the extended resource the NVIDIA device plugin advertises.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// The node labels NVIDIA's GPU feature discovery sets, with the values a real
// H200 reports (shared/data/h200: nvidia-smi -q, driver 580.159.04, CUDA 13.0,
// 143771 MiB, compute capability 9.0, MIG capable but disabled).
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory"
	LabelGPUCount   = "nvidia.com/gpu.count"
	LabelGPUFamily  = "nvidia.com/gpu.family"

	// H200Product is the gpu.product label value of an H200: the nvidia-smi
	// product name with spaces replaced, as GFD does.
	H200Product = "NVIDIA-H200"
	// H200MemoryMiB is an H200's memory as nvidia-smi reports it.
	H200MemoryMiB = 143771
)

// Per-GPU host shape of an H200 node. The captured H200 VM pins 16 vCPUs to
// its GPU (gpu-topo.txt, CPU affinity 0-15); 256 GiB per GPU matches the
// ~2 TiB of an eight-GPU HGX H200 host.
const (
	cpusPerGPU     = 16
	memoryPerGPU   = 256 << 30
	maxPodsPerNode = 110 // kubelet's default
)

// GPUNode returns a kwok-managed fake node that looks like an H200 machine
// with gpus GPUs: GPU feature discovery labels, standard kubernetes.io
// labels, and capacity = allocatable of cpu, memory, pods and nvidia.com/gpu
// sized per GPU. labels are added last and win, e.g. topology labels
// (zone, block, rack) or a flavor's node labels. With gpus == 0 it is a
// CPU-only node of the same host shape as one GPU's share.
func GPUNode(name string, gpus int, labels map[string]string) *corev1.Node {
	share := max(gpus, 1)
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpusPerGPU*share), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(memoryPerGPU*share), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(maxPodsPerNode, resource.DecimalSI),
	}
	nodeLabels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "kwok", // kwok's own convention for its nodes
	}
	if gpus > 0 {
		resources[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		for k, v := range h200Labels(gpus) {
			nodeLabels[k] = v
		}
	}
	for k, v := range labels {
		nodeLabels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      nodeLabels,
			Annotations: map[string]string{FakeNodeAnnotation: FakeNodeAnnotationValue},
		},
		// The apiserver keeps the status of a created Node (that is how a
		// kubelet registers), and kwok's node stage preserves what is set.
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources.DeepCopy()},
	}
}

// h200Labels are the GPU feature discovery labels of an H200 node.
func h200Labels(gpus int) map[string]string {
	return map[string]string{
		"nvidia.com/gpu.present":        "true",
		LabelGPUProduct:                 H200Product,
		LabelGPUMemory:                  strconv.Itoa(H200MemoryMiB),
		LabelGPUCount:                   strconv.Itoa(gpus),
		LabelGPUFamily:                  "hopper",
		"nvidia.com/gpu.compute.major":  "9",
		"nvidia.com/gpu.compute.minor":  "0",
		"nvidia.com/gpu.replicas":       "1",
		"nvidia.com/mig.capable":        "true",
		"nvidia.com/cuda.driver.major":  "580",
		"nvidia.com/cuda.driver.minor":  "159",
		"nvidia.com/cuda.driver.rev":    "04",
		"nvidia.com/cuda.runtime.major": "13",
		"nvidia.com/cuda.runtime.minor": "0",
	}
}

// The kwok pod-complete Stage reads these pod annotations; see RunFor.
const (
	RunForDelayAnnotation  = "pod-complete.stage.kwok.x-k8s.io/delay"
	RunForJitterAnnotation = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
)

// RunFor returns pod annotations (put them on a Job's pod template) that make
// a pod on a fake node run for d after it becomes Running and Ready, then
// succeed.
//
// kwok's pod-complete Stage (kustomize/stage/pod/general in kwok) acts only on
// Running, Ready pods owned by a Job. Its delay is the delay annotation, or 1s
// by default, and its jitter-delay (default 5s) is an upper bound: the
// effective delay is random in [delay, jitter-delay), or exactly jitter-delay
// when that is not larger. RunFor sets both to d, so the delay is exactly d
// (RunFor(0) completes at once). Without these annotations a Job's pod runs
// 1-5 s; pods not owned by a Job run until deleted.
func RunFor(d time.Duration) map[string]string {
	v := d.String()
	return map[string]string{RunForDelayAnnotation: v, RunForJitterAnnotation: v}
}

// WaitForNodeReady waits until the named node is Ready and schedulable in
// the sense that matters for kwok nodes: the node.kubernetes.io/not-ready
// taint the apiserver adds at creation has been removed by the
// node-lifecycle controller. It needs a Full plane.
func WaitForNodeReady(ctx context.Context, c client.Client, name string) error {
	var node corev1.Node
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return false, err
		}
		return nodeReady(&node), nil
	})
	if err != nil {
		return fmt.Errorf("node %s not ready (Ready=%s, taints %s): %w",
			name, readyCondition(&node), describeTaints(node.Spec.Taints), err)
	}
	return nil
}

// nodeReady reports Ready=True without the not-ready taint.
func nodeReady(node *corev1.Node) bool {
	if readyCondition(node) != corev1.ConditionTrue {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	return true
}

// readyCondition returns the status of the node's Ready condition, or
// Unknown if it has none yet.
func readyCondition(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
