package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Record is a replica's quota record kept on its pod instead of in a
// Workload (berthv1.AdmissionRecordAnnotation): the name the replica's
// Workload would have, what the replica is charged for, and its admission.
// berth writes it with the release patch, the one write such a replica
// costs; the pod is then what holds the quota, so a restart rebuilds the
// replica's usage from the pod, and the quota is given back when the pod
// ends or is gone.
type Record struct {
	// Workload is the name of the replica's Workload, were it to have one:
	// the replica's key in the engine.
	Workload string `json:"workload"`
	// Spec is what the replica is queued and charged for.
	Spec berthv1.WorkloadSpec `json:"spec"`
	// Admission is where and on what flavors the replica runs.
	Admission berthv1.Admission `json:"admission"`
}

// RecordRef names the pod of a replica offered without a Workload, and
// how to wake its reconciler once the engine decided.
type RecordRef struct {
	// Pod is the replica's pod.
	Pod types.NamespacedName
	// UID is the pod's UID: an eviction deletes that pod and no other.
	UID types.UID
	// Wake asks the replica's reconciler to look at it again. It must not
	// block.
	Wake func()
}

// RecordState says where a replica offered for admission without a
// Workload stands.
type RecordState int

const (
	// RecordOffered is a replica that waits for the next admission cycle.
	RecordOffered RecordState = iota
	// RecordAdmitted is a replica the cycle admitted; it is to be released with
	// its record.
	RecordAdmitted
	// RecordStarted is a replica whose pod carries the record and holds
	// the quota.
	RecordStarted
	// RecordNeedsWorkload is a replica the first cycle did not admit (it waits, or
	// needs a booking or a pinned node): it is queued with a Workload, as
	// every other gang is.
	RecordNeedsWorkload
)

// EncodeRecord is the annotation value of a record.
func EncodeRecord(r Record) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding the admission record of %s: %w", r.Workload, err)
	}
	return string(b), nil
}

// RecordOf reads the record on a pod. ok is false for a pod without one;
// an error says why a pod's record cannot be trusted: berth counts a
// record only on a live, released pod whose workload label holds the pod's
// own UID — a value berth alone writes on a pod it released on its record —
// and in the pod's own queue.
func RecordOf(p *corev1.Pod) (*Record, bool, error) {
	v, ok := p.Annotations[berthv1.AdmissionRecordAnnotation]
	if !ok {
		return nil, false, nil
	}
	r := &Record{}
	if err := json.Unmarshal([]byte(v), r); err != nil {
		return nil, true, fmt.Errorf("pod %s/%s: annotation %s is not a record: %w", p.Namespace, p.Name, berthv1.AdmissionRecordAnnotation, err)
	}
	switch {
	case slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == berthv1.AdmissionGate }):
		return nil, true, fmt.Errorf("pod %s/%s carries a record but is gated", p.Namespace, p.Name)
	case p.Labels[berthv1.WorkloadLabel] != string(p.UID):
		return nil, true, fmt.Errorf("pod %s/%s carries a record but label %s is not its own UID", p.Namespace, p.Name, berthv1.WorkloadLabel)
	case p.Labels[berthv1.QueueNameLabel] != r.Spec.QueueName || r.Spec.QueueName == "":
		return nil, true, fmt.Errorf("pod %s/%s carries a record of another queue", p.Namespace, p.Name)
	case r.Workload == "" || r.Admission.ClusterQueue == "" || len(r.Spec.PodSets) == 0:
		return nil, true, fmt.Errorf("pod %s/%s carries an incomplete record", p.Namespace, p.Name)
	}
	return r, true, nil
}

// Holds reports whether a pod's record still holds quota: the pod has not
// ended. A pod being deleted holds it until it is gone, as a Workload's
// finalizer holds a gang's quota while its pods run out their grace.
func Holds(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// RecordedWorkload is the admitted Workload a record stands for, as the
// engine is fed it: named as the replica's Workload would be, with the
// pod's UID (the value of the pod's workload label) and creation time.
func RecordedWorkload(p *corev1.Pod, r *Record) *berthv1.Workload {
	return &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: r.Workload, UID: p.UID, CreationTimestamp: p.CreationTimestamp},
		Spec:       *r.Spec.DeepCopy(),
		Status:     berthv1.WorkloadStatus{Admission: r.Admission.DeepCopy()},
	}
}

// KeyWorkloadName is the deterministic name of the Workload of a gang made
// of several objects, or of a replica: kind, key and a hash of both, so the
// same key in another namespace or kind never collides. A replica that
// waits without a Workload is in the engine under this name too.
func KeyWorkloadName(kind, namespace, key string) string {
	sum := sha256.Sum256([]byte(kind + "/" + namespace + "/" + key))
	prefix := strings.ToLower(kind) + "-" + key
	const maxLen = 253 - 6
	if len(prefix) > maxLen {
		prefix = prefix[:maxLen]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:5]
}
