package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/kubeletcheck"
	"github.com/pullrecords/pullrecords/fsstore"
)

// errRefused is wrapped by a writing command's refusal to write: another
// writer holds the records' lock, or a kubelet is running. It maps to exit
// status 2.
var errRefused = errors.New("refusing to write")

// guardWrite refuses a writing command (what, for example "fsck --repair")
// while a kubelet is seen running on this node, unless --kubelet-stopped
// asserts that none is. A check that cannot run (an unusable proc root, a
// healthz URL that is not one) refuses too: only --kubelet-stopped skips
// it. Call it before anything is written.
func (g *globalOptions) guardWrite(ctx context.Context, what string) error {
	if g.kubeletStopped {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := &kubeletcheck.Checker{ProcRoot: g.procRoot, HealthzURL: g.healthzURL}
	r, err := c.Detect(ctx)
	if err != nil {
		source := orDefault(g.procRootFrom, "--proc-root")
		if errors.Is(err, kubeletcheck.ErrBadHealthzURL) {
			source = orDefault(g.healthzURLFrom, "--kubelet-healthz-url")
		}
		return fmt.Errorf("%s: %w: the running-kubelet check cannot run: %s: %w; "+
			"point --proc-root (or %s) at the host's /proc and --kubelet-healthz-url (or %s) at the kubelet's healthz endpoint, "+
			"or pass --kubelet-stopped once the kubelet is stopped",
			what, errRefused, source, err, envProcRoot, envHealthzURL)
	}
	if !r.Running {
		return nil
	}
	return fmt.Errorf("%s: %w beside a running kubelet (%s): a stock kubelet reads the pull records only when it starts and would act on stale ones; "+
		"stop the kubelet, then pass --kubelet-stopped", what, errRefused, r.Evidence())
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// lockRefusal turns a *fsstore.LockedError in err into what's refusal,
// naming the holder; other errors are returned as they are.
func lockRefusal(what string, err error) error {
	var le *fsstore.LockedError
	if !errors.As(err, &le) {
		return err
	}
	holder := "another process"
	if le.PID > 0 {
		holder = fmt.Sprintf("process %d", le.PID)
		if !le.Started.IsZero() {
			holder += " (started " + le.Started.UTC().Format(time.RFC3339) + ")"
		}
	}
	return fmt.Errorf("%s: %w: the pull records are locked by %s through %s; only one writer may open them (stop it first); read-only commands still work",
		what, errRefused, holder, le.Path)
}
