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
	current   *Server
)

// Current returns the server Main started (nil before Main, or if its start
// failed). After Main returns it is the stopped server.
func Current() *Server {
	currentMu.Lock()
	defer currentMu.Unlock()
	return current
}

// Main is for TestMain: it starts a server with opts, stores it for Current,
// runs m.Run and stops the server, and returns the exit code for os.Exit
// (1 if the start or the stop failed). The server is stopped also when
// m.Run panics in TestMain's goroutine (the panic is re-raised afterwards).
// A test that panics in its own goroutine ends the process before any
// deferred code runs: then the children die by their parent-death signal
// (see the package documentation) and Dir stays behind in the temp dir.
func Main(m *testing.M, opts Options) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	s, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	currentMu.Lock()
	current = s
	currentMu.Unlock()
	defer func() {
		r := recover()
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			if code == 0 {
				code = 1
			}
		}
		if r != nil {
			panic(r)
		}
	}()
	return m.Run()
}
