package apiservertest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds Main's start of the server.
const startTimeout = 2 * time.Minute

var (
	currentMu sync.Mutex
	mainOpts  *Options // set by Main: Need may start a server
	current   *Server
	startErr  error // of the one start Need made
)

// Current returns the server Need started (nil before, or if its start
// failed). After Main returns it is the stopped server.
func Current() *Server {
	currentMu.Lock()
	defer currentMu.Unlock()
	return current
}

// Need returns the test binary's server, starting it at the first call
// with Main's options, so a test binary whose selected tests need no API
// server starts none. A failed start (the Kubernetes programs not built,
// say: the error gives the command that builds them) fails t, and every
// later Need at once with the same error. Outside Main it fails t.
func Need(t testing.TB) *Server {
	t.Helper()
	currentMu.Lock()
	defer currentMu.Unlock()
	switch {
	case current != nil:
		return current
	case startErr != nil:
	case mainOpts == nil:
		startErr = fmt.Errorf("apiservertest: Need outside Main (call apiservertest.Main from TestMain)")
	default:
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		current, startErr = Start(ctx, *mainOpts)
		cancel()
	}
	if startErr != nil {
		t.Fatal(startErr)
	}
	return current
}

// Main is for TestMain: it runs m.Run, with Need starting a server with
// opts on first use, then stops that server, and returns the exit code for
// os.Exit (1 if the stop failed). The server is stopped also when m.Run
// panics in TestMain's goroutine (the panic is re-raised afterwards).
// A test that panics in its own goroutine ends the process before any
// deferred code runs: then the children die by their parent-death signal
// (see the package documentation) and Dir stays behind in the temp dir.
func Main(m *testing.M, opts Options) (code int) {
	currentMu.Lock()
	mainOpts = &opts
	currentMu.Unlock()
	defer func() {
		r := recover()
		if s := Current(); s != nil {
			if err := s.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "FAIL:", err)
				if code == 0 {
					code = 1
				}
			}
		}
		if r != nil {
			panic(r)
		}
	}()
	return m.Run()
}
