package crishim

import (
	"context"
	"errors"
	"sync"
)

// flightGroup runs one call per key at a time and hands its result to every
// caller that asked for that key while it ran (a small singleflight). The
// call runs in its own goroutine with a context detached from any caller's
// cancellation (it keeps the first caller's values, its logger included);
// each caller waits only as long as its own context allows, and when the
// last waiter gives up the call's context is cancelled and the key is
// forgotten, so the next caller starts afresh. A finished call is forgotten
// too: results, refusals above all, are never reused by a later caller.
type flightGroup struct {
	mu      sync.Mutex
	flights map[string]*flight
}

// verdict is a flight's answer: the digest the origin accepted, and
// whether a stamp answered instead (a flight that ended just before this
// one began left it).
type verdict struct {
	digest     string
	remembered bool
}

type flight struct {
	done    chan struct{} // closed when v and err are set
	v       verdict
	err     error
	waiters int // under flightGroup.mu
	cancel  context.CancelFunc
}

// do returns the verdict of fn for key, running fn unless a call for key is
// running already. joined tells whether the caller joined a running call.
// If ctx ends first, do returns ctx's error.
func (g *flightGroup) do(ctx context.Context, key string, fn func(context.Context) (verdict, error)) (v verdict, joined bool, err error) {
	g.mu.Lock()
	if g.flights == nil {
		g.flights = make(map[string]*flight)
	}
	f, joined := g.flights[key]
	if !joined {
		callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		g.flights[key] = f
		go g.run(callCtx, key, f, fn)
	}
	f.waiters++
	g.mu.Unlock()

	select {
	case <-f.done:
		return f.v, joined, f.err
	case <-ctx.Done():
		g.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
			g.forget(key, f)
		}
		g.mu.Unlock()
		return verdict{}, joined, ctx.Err()
	}
}

func (g *flightGroup) run(ctx context.Context, key string, f *flight, fn func(context.Context) (verdict, error)) {
	defer f.cancel()
	v, err := fn(ctx)
	f.v, f.err = v, err
	g.mu.Lock()
	g.forget(key, f)
	g.mu.Unlock()
	close(f.done)
}

// forget drops key if f is still its flight; the caller holds g.mu.
func (g *flightGroup) forget(key string, f *flight) {
	if g.flights[key] == f {
		delete(g.flights, key)
	}
}

// waiting returns the number of callers waiting for key (tests).
func (g *flightGroup) waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.flights[key]; ok {
		return f.waiters
	}
	return 0
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
