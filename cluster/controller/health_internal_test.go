package controller

import (
	"strings"
	"testing"
)

// Every state of the health flags, and what Healthy says in it.
func TestHealthyStates(t *testing.T) {
	type flags struct{ running, synced, electing, leaderKnown, leading bool }
	cases := []struct {
		name string
		f    flags
		want string // "" healthy, else a part of the error
	}{
		{"not started", flags{}, "not running"},
		{"running, syncing", flags{running: true}, "not synced"},
		{"running, synced", flags{running: true, synced: true}, ""},
		{"stopped after sync", flags{synced: true}, "not running"},
		{"electing, no leader seen", flags{electing: true}, "no leader seen"},
		{"standby", flags{electing: true, leaderKnown: true}, ""},
		{"leading, syncing", flags{electing: true, leaderKnown: true, leading: true, running: true}, "not synced"},
		{"leading, synced", flags{electing: true, leaderKnown: true, leading: true, running: true, synced: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Controller
			c.health.running.Store(tc.f.running)
			c.health.synced.Store(tc.f.synced)
			c.health.electing.Store(tc.f.electing)
			c.health.leaderKnown.Store(tc.f.leaderKnown)
			c.health.leading.Store(tc.f.leading)
			err := c.Healthy()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Healthy() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Healthy() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A nil *Metrics counts nothing and does not panic: the controller runs
// without metrics.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.synced(queueImageCaches, nil)
	m.podCreated()
	m.resultDecided("succeeded")
	m.leading(true)
	if m != nil {
		t.Fatal("unreachable")
	}
}
