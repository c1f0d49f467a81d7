package agent

import (
	"errors"
	"fmt"
	"time"
)

// HealthRounds is how many resync intervals may pass without a good round
// before Healthy fails: 3, so with the default 1m interval an agent is
// unhealthy after 3m, the controller's default --agent-timeout, after
// which the controller stops trusting its report anyway.
const HealthRounds = 3

// Healthy reports whether the agent's loop is alive, for /healthz: nil
// while Run runs and its latest good round (one that wrote its report, or
// found the object's status already current or the object not created
// yet) is at most HealthRounds × ResyncInterval old by the agent's clock;
// before the first good round, Run's start counts instead. Otherwise an
// error saying why (not running; no good round for how long). It is safe
// for concurrent use.
func (a *Agent) Healthy() error {
	if !a.running.Load() {
		return errors.New("agent not running")
	}
	last := time.Unix(0, a.lastGood.Load())
	bound := HealthRounds * a.resync
	if age := a.clock.Since(last); age > bound {
		return fmt.Errorf("no successful report round for %v (bound %v)", age.Round(time.Second), bound)
	}
	return nil
}

// markGood records a good round (or Run's start) for Healthy.
func (a *Agent) markGood() { a.lastGood.Store(a.clock.Now().UnixNano()) }
