package admission

import "strings"

// Flavor fallback for topology gangs. Quota chooses a gang's flavor per
// resource group (chooseFlavor): the first flavor, in the queue's order, where
// it fits without borrowing, else the first where it fits by borrowing. A
// topology gang also needs a domain of that flavor (or a booking there). When
// quota fits a flavor but no domain of it can take the gang now, the gang
// falls back to the next flavor whose quota fits, in the same order —
// non-borrowing flavors in the group's order, then borrowing ones — and is
// placed, or books capacity, on the first where placement succeeds. A booking
// on an earlier flavor wins over a fit on existing nodes of a later one: the
// queue's flavor order is the administrator's preference, as it is for quota,
// and placement only decides whether a flavor can take the gang at all.

// fallsBack reports whether a placement outcome lets a topology gang try the
// next flavor: its quota fits, but no domain of the flavor takes it now.
func fallsBack(reason PendingReason) bool {
	return reason == TopologyUnavailable || reason == ExceedsDomainCapacity
}

// fallBack tries, for a topology gang that quota placed on out.flavor but no
// domain there takes, the other flavors of that flavor's resource group
// whose quota fits, in flavor-choice order. On the first where placement
// succeeds, out becomes that admission. Otherwise out keeps the first
// flavor's flavors; its reason is TopologyUnavailable if any flavor tried
// may take the gang later (else the first flavor's reason), and its message
// gives each flavor of the group its own reason, in the group's order.
func (topo *topology) fallBack(c *cqState, w *wl, out *outcome) {
	gi := -1
	for g, fi := range out.flavors {
		if fi >= 0 && c.groups[g].flavors[fi].name == out.flavor {
			gi = g
			break
		}
	}
	if gi < 0 || len(c.groups[gi].flavors) < 2 {
		return
	}
	first := out.flavors[gi]
	msgs := make([]string, len(c.groups[gi].flavors))
	msgs[first] = out.msg
	waitFlavor := ""
	if out.reason == TopologyUnavailable {
		waitFlavor = out.flavor
	}
	for _, fi := range fallbackOrder(c, w, gi) {
		if fi == first {
			continue
		}
		out.flavors[gi] = fi
		p, reason, msg, flavor := topo.placeIn(c, w, out.flavors)
		if reason == "" {
			out.place, out.reason, out.msg, out.flavor = p, "", "", flavor
			return
		}
		msgs[fi] = msg
		if reason == TopologyUnavailable && waitFlavor == "" {
			waitFlavor = flavor
		}
	}
	out.flavors[gi] = first
	if waitFlavor != "" {
		out.reason, out.flavor = TopologyUnavailable, waitFlavor
	}
	out.msg = topo.names.msgPerFlavor(c, w, gi, msgs)
}

// fallbackOrder lists the flavors of group gi whose quota w fits: those
// without borrowing in the group's order, then those by borrowing — the
// order chooseFlavor picks from.
func fallbackOrder(c *cqState, w *wl, gi int) []int {
	var own, borrowing []int
	for fi, f := range c.groups[gi].flavors {
		fits, borrows := c.fitsFlavor(w, gi, f.id)
		switch {
		case !fits:
		case borrows:
			borrowing = append(borrowing, fi)
		default:
			own = append(own, fi)
		}
	}
	return append(own, borrowing...)
}

// msgPerFlavor joins the reason of every flavor of group gi, in the group's
// order: msgs[fi] for the flavors whose placement was tried, the first
// resource short of quota for the others.
func (nm *names) msgPerFlavor(c *cqState, w *wl, gi int, msgs []string) string {
	var b strings.Builder
	for fi, f := range c.groups[gi].flavors {
		if fi > 0 {
			b.WriteString("; ")
		}
		b.WriteString("flavor ")
		b.WriteString(f.name)
		b.WriteString(": ")
		if msgs[fi] != "" {
			b.WriteString(msgs[fi])
			continue
		}
		b.WriteString(nm.msgQuotaShort(c, w, gi, f.id))
	}
	return b.String()
}

// msgQuotaShort names the first resource of group gi that w's requests do
// not fit in flavor f.
func (nm *names) msgQuotaShort(c *cqState, w *wl, gi int, f int32) string {
	for _, r := range w.req {
		if c.resGroup[r.res] != gi {
			continue
		}
		if a := c.available(makeFR(f, r.res)); r.amt > a {
			return "quota exhausted: requested " + fmtAmount(r.amt) + " " + string(nm.resources[r.res]) + ", available " + fmtAmount(a)
		}
	}
	return "quota exhausted"
}
