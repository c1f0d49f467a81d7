package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaderElection names the Lease replicas compete for.
type LeaderElection struct {
	Namespace string // the controller's namespace
	Name      string // default "pullrecords-controller"
	Identity  string // this replica, e.g. its pod name; required

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration // defaults 15s, 10s, 2s
}

// RunWithLeaderElection runs the controller while this replica holds the
// Lease and returns when ctx is done or the lease is lost (the process
// should then exit and start over: its informers' view is that of a
// leader that was replaced). When Run fails while leading (for example
// ErrKubeFledgedRunning), the failure is logged at error level, the Lease
// is released at once and the error is returned: the process exits
// non-zero and its restarts show the reason, instead of a replica holding
// the Lease while doing nothing.
func (c *Controller) RunWithLeaderElection(ctx context.Context, le LeaderElection) error {
	if le.Namespace == "" || le.Identity == "" {
		return fmt.Errorf("%w: leader election needs a namespace and an identity", ErrInvalidConfig)
	}
	if le.Name == "" {
		le.Name = "pullrecords-controller"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&le.LeaseDuration, 15*time.Second)
	def(&le.RenewDeadline, 10*time.Second)
	def(&le.RetryPeriod, 2*time.Second)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.cfg.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	logger := klog.FromContext(ctx).WithValues("lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
	c.health.electing.Store(true)
	defer func() {
		c.health.electing.Store(false)
		c.health.leaderKnown.Store(false)
		c.health.leading.Store(false)
	}()
	runErr := make(chan error, 1)
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading")
				c.health.leading.Store(true)
				err := c.Run(ctx)
				c.health.leading.Store(false)
				if err != nil && ctx.Err() == nil {
					logger.Error(err, "Controller failed while leading; releasing the lease and exiting")
				}
				runErr <- err
				stopElecting() // release the lease: this replica does no work
			},
			OnStoppedLeading: func() { logger.Info("No longer leading") },
			OnNewLeader: func(id string) {
				c.health.leaderKnown.Store(true)
				if id != le.Identity {
					logger.Info("Another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	elector.Run(electCtx)
	select {
	case err := <-runErr:
		return err
	default:
		return ctx.Err()
	}
}
