package main

import (
	"os"
	"testing"
)

// requireOrSkip ends a test that cannot run here (ok false): it fails with
// reason when CI is set, since CI provides what the test needs (root, a
// pseudo-terminal, time), and skips only outside CI.
func requireOrSkip(t testing.TB, ok bool, reason string) {
	t.Helper()
	switch {
	case ok:
	case os.Getenv("CI") != "":
		t.Fatalf("cannot run: %s (CI is set: a test CI cannot run fails)", reason)
	default:
		t.Skipf("%s (skipped outside CI only; with CI set this fails)", reason)
	}
}
