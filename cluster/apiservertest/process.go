package apiservertest

import (
	"time"

	"github.com/pullrecords/pullrecords/cluster/internal/childproc"
)

// PIDFileEnv names the environment variable that, when set, names a file to
// which every started process's PID is appended (one per line), so that a
// calling script can kill leftovers from a trap.
const PIDFileEnv = childproc.PIDFileEnv

// termGrace is how long Stop gives each child after SIGTERM.
const termGrace = 5 * time.Second
