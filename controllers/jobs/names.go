package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WorkloadName is the deterministic name of the Workload of a job: kind,
// job name and a hash of the job's UID, so a job re-created under the same
// name gets a new Workload.
func WorkloadName(kind string, obj client.Object) string {
	sum := sha256.Sum256([]byte(obj.GetUID()))
	suffix := hex.EncodeToString(sum[:])[:5]
	prefix := strings.ToLower(kind) + "-" + obj.GetName()
	const maxLen = 253 - 6
	if len(prefix) > maxLen {
		prefix = prefix[:maxLen]
	}
	return prefix + "-" + suffix
}

// GangWorkloadName is the deterministic name of the Workload of one gang of
// an object that runs several (see Splitter).
func GangWorkloadName(kind string, obj client.Object, suffix string) string {
	sum := sha256.Sum256([]byte(string(obj.GetUID()) + "/" + suffix))
	hash := hex.EncodeToString(sum[:])[:5]
	prefix := strings.ToLower(kind) + "-" + obj.GetName()
	maxLen := 253 - 7 - len(suffix)
	if len(prefix) > maxLen {
		prefix = prefix[:maxLen]
	}
	return prefix + "-" + suffix + "-" + hash
}
