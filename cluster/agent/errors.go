package agent

import "errors"

var (
	// ErrInvalidConfig is returned by New for a Config it cannot run with;
	// the error names the field and the value.
	ErrInvalidConfig = errors.New("invalid agent config")
	// ErrAlreadyRunning is returned by Run when the Agent is already
	// running (an Agent runs at most once at a time).
	ErrAlreadyRunning = errors.New("agent already running")
)
