package pods

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/berth-dev/berth/controllers/jobs"
)

var _ jobs.Assumer = (*Gang)(nil)

// releases are the pods of a gang berth released, by UID, with the
// resourceVersion each release returned. The releases of a gang's pods
// reach the cache one by one: the first one triggers the next reconcile,
// which would see the others still gated and release them again — a
// second PATCH per pod that changes nothing. A gated copy older than the
// release is taken as released.
type releases struct {
	// assumed are the earlier releases whose pods the cache still shows
	// gated.
	assumed map[types.UID]string
	// written are the releases of the last Write.
	written map[types.UID]string
}

// Assume implements jobs.Assumer: it keeps the releases whose pods' cached
// copies are still older than the release.
func (g *Gang) Assume(released map[types.UID]string) {
	g.writes.assumed = nil
	for i := range g.Pods {
		p := &g.Pods[i]
		rv, ok := released[p.UID]
		if !ok || !IsGated(p) {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(p.ResourceVersion, rv); err == nil && cmp < 0 {
			if g.writes.assumed == nil {
				g.writes.assumed = map[types.UID]string{}
			}
			g.writes.assumed[p.UID] = rv
		}
	}
}

// Written implements jobs.Assumer: the releases still assumed and those of
// the last Write.
func (g *Gang) Written() map[types.UID]string {
	out := maps.Clone(g.writes.assumed)
	if len(g.writes.written) > 0 && out == nil {
		out = map[types.UID]string{}
	}
	maps.Copy(out, g.writes.written)
	return out
}

// wrote records the release of p, whose resourceVersion is the one the
// release returned.
func (r *releases) wrote(p *corev1.Pod) {
	if r.written == nil {
		r.written = map[types.UID]string{}
	}
	r.written[p.UID] = p.ResourceVersion
}

// gated reports whether p still waits for berth: gated, and not released
// by a write the cache does not show yet.
func (g *Gang) gated(p *corev1.Pod) bool {
	_, released := g.writes.assumed[p.UID]
	return IsGated(p) && !released
}
