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
	case errors.Is(err, errProblemsFound), errors.Is(err, errNotFound):
		return exitProblems
	default:
		return exitFailed
	}
}

// reportError prints err as one line on w, prefixed with the command name:
// newlines become "; ", other control characters are escaped (esc). A
// *hintedError's hint follows the line, after an empty line.
func reportError(w io.Writer, err error) {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "\n", "; ")
	fmt.Fprintf(w, "pullrecords: %s\n", esc(msg))
	var h *hintedError
	if errors.As(err, &h) && len(h.hint) > 0 {
		fmt.Fprintln(w)
		for _, line := range h.hint {
			// Tabs indent the hint; everything else is escaped.
			fmt.Fprintln(w, strings.ReplaceAll(esc(line), `\t`, "\t"))
		}
	}
}

// hintedError is an error with advice printed after its line (cobra's "Did
// you mean this?"). The hint is made of the command's own words, never of
// input.
type hintedError struct {
	err  error
	hint []string
}

func (e *hintedError) Error() string { return e.err.Error() }

func (e *hintedError) Unwrap() error { return e.err }

// usageErrorf returns an error that wraps errUsage.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}
