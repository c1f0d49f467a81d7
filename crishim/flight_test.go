package crishim

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

// 1,000 concurrent Admits of one image with one credential make exactly one
// origin request, and all are admitted.
func TestConcurrentAdmitsShareOneVerify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.verifier.allow(authA, privRepo, digest1)
		release := make(chan struct{})
		f.verifier.block = release
		ctx := testContext(t)
		req := Request{Image: privRepo + ":v1", Auth: authA, Pod: tenantA}

		const n = 1000
		admissions := make([]Admission, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { admissions[i], errs[i] = f.gate.Admit(ctx, req) })
		}
		synctest.Wait() // every Admit waits on the one blocked origin request
		if got := f.gate.flights.waiting(authKey(authA) + "\x00" + req.Image); got != n {
			t.Fatalf("%d callers wait on the flight, want %d", got, n)
		}
		close(release)
		wg.Wait()
		if c := f.verifier.calls.Load(); c != 1 {
			t.Errorf("%d concurrent Admits made %d origin requests, want 1", n, c)
		}
		for i := range n {
			if errs[i] != nil || admissions[i].Digest != digest1 {
				t.Fatalf("Admit %d = %+v, %v; want digest %s", i, admissions[i], errs[i], digest1)
			}
		}
	})
}

// Every waiter of a refused flight is refused, and the next request asks
// again.
func TestConcurrentWaitersOfARefusalAreAllRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil) // nothing granted
		release := make(chan struct{})
		f.verifier.block = release
		ctx := testContext(t)
		req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}

		const n = 50
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = f.gate.Admit(ctx, req) })
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, errDenied) {
				t.Errorf("waiter %d: %v, want the origin's denial", i, err)
			}
		}
		if c := f.verifier.calls.Load(); c != 1 {
			t.Errorf("origin requests = %d, want 1", c)
		}
		if _, err := f.gate.Admit(ctx, req); !errors.Is(err, errDenied) {
			t.Errorf("Admit after the refused flight = %v, want refused", err)
		}
		if c := f.verifier.calls.Load(); c != 2 {
			t.Errorf("origin requests = %d, want 2: a refusal must not be reused", c)
		}
	})
}

// Requests with different credentials never share a flight.
func TestDifferentCredentialsDoNotShareAFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.verifier.allow(authA, privRepo, digest1)
		release := make(chan struct{})
		f.verifier.block = release
		ctx := testContext(t)
		image := privRepo + "@" + digest1
		var errA, errB error
		var wg sync.WaitGroup
		wg.Go(func() { _, errA = f.gate.Admit(ctx, Request{Image: image, Auth: authA, Pod: tenantA}) })
		wg.Go(func() { _, errB = f.gate.Admit(ctx, Request{Image: image, Auth: authB, Pod: tenantB}) })
		synctest.Wait()
		close(release)
		wg.Wait()
		if errA != nil {
			t.Errorf("tenant A: %v", errA)
		}
		if !errors.Is(errB, errDenied) {
			t.Errorf("tenant B, waiting at the same time with another credential: %v, want denied", errB)
		}
		if c := f.verifier.calls.Load(); c != 2 {
			t.Errorf("origin requests = %d, want 2", c)
		}
	})
}

// A waiter whose context ends gets its context's error and admits nothing;
// the others still get the answer; when the last waiter leaves, the origin
// request is cancelled.
func TestWaitersHonourTheirOwnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.verifier.allow(authA, privRepo, digest1)
		release := make(chan struct{})
		f.verifier.block = release
		base := testContext(t)
		req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}

		impatient, cancel := context.WithCancel(base)
		var errImpatient, errPatient error
		var wg sync.WaitGroup
		wg.Go(func() { _, errImpatient = f.gate.Admit(impatient, req) })
		wg.Go(func() { _, errPatient = f.gate.Admit(base, req) })
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !errors.Is(errImpatient, context.Canceled) || errors.Is(errImpatient, ErrRefused) {
			t.Errorf("cancelled waiter: %v, want context.Canceled (not a refusal)", errImpatient)
		}
		close(release)
		wg.Wait()
		if errPatient != nil {
			t.Errorf("patient waiter: %v", errPatient)
		}

		// Everyone gives up: the origin request is cancelled, nothing stamped.
		f2 := newFixture(t, nil)
		f2.verifier.allow(authA, privRepo, digest2)
		f2.verifier.block = make(chan struct{})
		req2 := Request{Image: privRepo + "@" + digest2, Auth: authA, Pod: tenantA}
		ctx2, cancel2 := context.WithCancel(base)
		var err2 error
		wg.Go(func() { _, err2 = f2.gate.Admit(ctx2, req2) })
		synctest.Wait()
		cancel2()
		wg.Wait()
		synctest.Wait()
		if !errors.Is(err2, context.Canceled) {
			t.Errorf("sole waiter: %v, want context.Canceled", err2)
		}
		if c := f2.verifier.cancelled.Load(); c != 1 {
			t.Errorf("origin requests cancelled = %d, want 1 once no one waits", c)
		}
		if f2.stamps.Fresh(credstampKey(authA, digest2), f2.gate.cfg.TTL) {
			t.Errorf("an abandoned verification was stamped")
		}
	})
}
