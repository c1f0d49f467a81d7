package nodegate

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/credstamp"
)

// pruneVerifications removes expired verifications at start and then every
// TTL (at most every ten minutes), so that the stamps in memory and on
// disk do not grow with every (credential, repository, digest) ever seen.
func pruneVerifications(ctx context.Context, stamps *credstamp.Store, ttl time.Duration) {
	logger := klog.FromContext(ctx)
	every := min(ttl, 10*time.Minute)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if n, err := stamps.Prune(ttl); err != nil {
			logger.Error(err, "Could not prune expired verifications")
		} else if n > 0 {
			logger.V(2).Info("Pruned expired verifications", "removed", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
