package setup

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/berth-dev/berth/controllers/jobs"
)

// DefaultKindPollInterval is how often berth looks whether the cluster now
// serves a job kind it did not serve when berth started (Options.KindPollInterval).
const DefaultKindPollInterval = 30 * time.Second

// lateKinds registers, once the cluster serves its API, the reconciler of
// each job kind whose CRD was not installed when berth started (a JobSet
// or LeaderWorkerSet operator installed later): no restart is needed. The
// reconcilers' cache indexes were registered at start (jobs.Reconciler.Index),
// since an informer takes no index once it runs; their controllers join the
// running manager, which starts them.
type lateKinds struct {
	mgr      ctrl.Manager
	pending  []*jobs.Reconciler
	interval time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the job
// reconcilers it registers act only on the leader.
func (*lateKinds) NeedLeaderElection() bool { return true }

// Start polls until every pending kind is served or ctx ends.
func (l *lateKinds) Start(ctx context.Context) error {
	log := l.mgr.GetLogger().WithName("job-kinds")
	err := wait.PollUntilContextCancel(ctx, l.interval, false, func(ctx context.Context) (bool, error) {
		var still []*jobs.Reconciler
		for _, r := range l.pending {
			gvk := r.GVK()
			if _, err := l.mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				if !meta.IsNoMatchError(err) {
					log.Error(err, "looking up job kind", "kind", gvk.String())
				}
				still = append(still, r)
				continue
			}
			if err := r.Register(ctx, l.mgr); err != nil {
				return false, fmt.Errorf("registering %s controller once its API is served: %w", r.Name(), err)
			}
			log.Info("job kind now served by the cluster; managing it", "kind", gvk.String())
		}
		l.pending = still
		return len(still) == 0, nil
	})
	if ctx.Err() != nil {
		return nil // stopped with the manager
	}
	return err
}
