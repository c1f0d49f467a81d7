package controller

import (
	"errors"
	"sync/atomic"
)

// health is what Healthy reads: set by Run and RunWithLeaderElection,
// read from any goroutine.
type health struct {
	running     atomic.Bool // Run is between its start and its return
	synced      atomic.Bool // Run's informers have synced
	electing    atomic.Bool // RunWithLeaderElection is running
	leaderKnown atomic.Bool // the elector has seen a leader (this replica or another)
	leading     atomic.Bool // this replica holds the Lease
}

// Healthy reports whether the controller's loops are alive, for /healthz:
//   - under RunWithLeaderElection: nil once the elector has seen who leads
//     while another replica leads (a standby is healthy), and nil while
//     this replica leads only once Run's informers have synced;
//   - under Run alone: nil once the informers have synced, until Run
//     returns;
//   - otherwise (not started, stopped, leading but not yet synced, leader
//     not yet known) an error saying which.
//
// It is safe for concurrent use.
func (c *Controller) Healthy() error {
	h := &c.health
	if h.electing.Load() {
		switch {
		case h.leading.Load() && !h.synced.Load():
			return errors.New("leading, informers not synced yet")
		case h.leading.Load():
			return nil
		case h.leaderKnown.Load():
			return nil // a standby: another replica leads
		default:
			return errors.New("leader election: no leader seen yet")
		}
	}
	switch {
	case !h.running.Load():
		return errors.New("controller not running")
	case !h.synced.Load():
		return errors.New("informers not synced yet")
	}
	return nil
}
