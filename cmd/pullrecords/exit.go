package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit statuses, documented in the root help.
const (
	exitOK       = 0
	exitProblems = 1
	exitFailed   = 2
)

// exitCode maps an error returned by a command to the process exit status.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errRefused):
		return exitFailed
	case errors.Is(err, errProblemsFound):
		return exitProblems
	default:
		return exitFailed
	}
}

// reportError prints err as one line on w, prefixed with the command name:
// newlines become "; ", other control characters are escaped (esc).
func reportError(w io.Writer, err error) {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "\n", "; ")
	fmt.Fprintf(w, "pullrecords: %s\n", esc(msg))
}

// usageErrorf returns an error that wraps errUsage.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}
