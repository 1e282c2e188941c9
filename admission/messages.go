package admission

import (
	"fmt"
	"strconv"
	"strings"
)

// Messages are deterministic and never include a queue position: the caller writes
// them to a status condition only when they change.

// heldBecause says why a missing or held queue admits nothing, and what to do
// about it: the reason is written to workloads that wait there, so its
// message names the object to create or change.
func heldBecause(c *cqState) (PendingReason, string) {
	switch {
	case c.spec == nil:
		return ClusterQueueNotFound, msgNotFound(c.name)
	case len(c.spec.MissingFlavors) > 0:
		return FlavorNotFound, msgFlavorsNotFound(c.name, c.spec.MissingFlavors)
	}
	return ClusterQueueStopped, msgStopped(c.name)
}

func msgNotFound(cq string) string {
	return fmt.Sprintf("ClusterQueue %q does not exist: create it, or point the workload's LocalQueue at another; "+
		"the workload waits until then", cq)
}

func msgFlavorsNotFound(cq string, flavors []string) string {
	return fmt.Sprintf("ResourceFlavors %s of ClusterQueue %q do not exist: create them, or remove them from the queue; "+
		"until then it admits nothing (admitted workloads keep running)", strings.Join(flavors, ", "), cq)
}

func msgStopped(cq string) string {
	return fmt.Sprintf("ClusterQueue %q is stopped; admitted workloads keep running, pending ones wait", cq)
}

func msgBlocked(cq string, head WorkloadKey) string {
	return fmt.Sprintf("waiting behind %s, the head of StrictFIFO ClusterQueue %q, which does not fit", head, cq)
}

func msgWaiting(victims []WorkloadKey) string {
	return fmt.Sprintf("waiting for %d preempted workload(s) to release quota: %s", len(victims), victimKeys(victims))
}

// msgFor builds the message of a not-admitted outcome other than InsufficientQuota.
func (nm *names) msgFor(c *cqState, w *wl, out outcome) string {
	switch out.reason {
	case UnsupportedResource:
		return fmt.Sprintf("resource %s is not covered by any resource group of ClusterQueue %q", nm.resources[out.group], c.name)
	case ExceedsMaxQuota:
		return nm.msgExceeds(c, w, out.group)
	case NoMatchingFlavor:
		return nm.msgNoMatchingFlavor(c, w, out.group)
	case ReservedForHead:
		msg, _ := msgReserved(c)
		return msg
	case InsufficientQuota:
		return nm.msgInsufficient(c, w, out.group)
	case UnknownTopologyLevel, TopologyUnavailable, ExceedsDomainCapacity, ProvisioningBackoff:
		return out.msg
	}
	return string(out.reason)
}

// msgReserved is the ReservedForHead message of c's workloads, and the head
// it names.
func msgReserved(c *cqState) (string, WorkloadKey) {
	head, _ := c.pending.min()
	why := "it has waited too long"
	if len(head.victims) > 0 {
		why = "it waits for the workloads it preempted to release them"
	}
	return fmt.Sprintf("ClusterQueue %q reserves the resources its head %s needs; %s", c.name, head.key, why), head.key
}

// msgInsufficient lists, per flavor tried in group gi, the first resource short:
// "insufficient quota for nvidia.com/gpu in flavor h200: requested 16, available 8
// (nominal 8, borrowable 0)". In the parenthesis, nominal is the part of available
// that is the queue's own unused quota and borrowable the part it would borrow.
//
// It runs for every evaluation that does not fit, so it appends into a reused buffer
// instead of using fmt.
func (nm *names) msgInsufficient(c *cqState, w *wl, gi int) string {
	b := nm.msgBuf[:0]
	for _, f := range c.groups[gi].flavors {
		if w.filtered && !f.openTo(c, w, gi) {
			continue
		}
		for _, r := range w.req {
			if c.resGroup[r.res] != gi {
				continue
			}
			k := makeFR(f.id, r.res)
			a := c.available(k)
			if r.amt <= a {
				continue
			}
			own := max(0, min(a, c.quota[k].nominal-c.usage[k]))
			if len(b) > 0 {
				b = append(b, "; "...)
			}
			b = append(b, "insufficient quota for "...)
			b = append(b, nm.resources[r.res]...)
			b = append(b, " in flavor "...)
			b = append(b, f.name...)
			b = append(b, ": requested "...)
			b = appendAmount(b, r.amt)
			b = append(b, ", available "...)
			b = appendAmount(b, a)
			b = append(b, " (nominal "...)
			b = appendAmount(b, own)
			b = append(b, ", borrowable "...)
			b = appendAmount(b, a-own)
			b = append(b, ')')
			break
		}
	}
	nm.msgBuf = b
	return string(b)
}

func (nm *names) msgExceeds(c *cqState, w *wl, gi int) string {
	var parts []string
	for _, f := range c.groups[gi].flavors {
		if !f.openTo(c, w, gi) {
			continue
		}
		for _, r := range w.req {
			if c.resGroup[r.res] != gi {
				continue
			}
			if m := c.maxAvailable(makeFR(f.id, r.res)); r.amt > m {
				parts = append(parts, fmt.Sprintf("requested %s of %s exceeds what ClusterQueue %q can ever get in flavor %s (%s)",
					fmtAmount(r.amt), nm.resources[r.res], c.name, f.name, fmtAmount(m)))
				break
			}
		}
	}
	return strings.Join(parts, "; ")
}

func (nm *names) msgPreempted(c *cqState, w *wl, v victim) string {
	switch v.reason {
	case InClusterQueue:
		return fmt.Sprintf("preempted to admit %s in ClusterQueue %q: lower priority in the same ClusterQueue",
			withPriority(w.key, w.prio), c.name)
	case InCohortReclamation:
		return fmt.Sprintf("preempted to admit %s in ClusterQueue %q, which reclaims quota that ClusterQueue %q borrows",
			w.key, c.name, v.cq.name)
	}
	return fmt.Sprintf("preempted to admit %s in ClusterQueue %q: ClusterQueue %q is above its fair share",
		w.key, c.name, v.cq.name)
}

// withPriority names a workload with its priority, "ns/name (priority 5)",
// in the form Redact removes whole.
func withPriority(k WorkloadKey, prio int32) string {
	return k.String() + priorityNote + strconv.FormatInt(int64(prio), 10) + ")"
}

// fmtAmount prints a milli-unit amount in whole units when exact ("16"), otherwise
// with an "m" suffix like a Kubernetes quantity ("1500m").
func fmtAmount(a int64) string { return string(appendAmount(nil, a)) }

func appendAmount(b []byte, a int64) []byte {
	if a%1000 == 0 {
		return strconv.AppendInt(b, a/1000, 10)
	}
	return append(strconv.AppendInt(b, a, 10), 'm')
}
