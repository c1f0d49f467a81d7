package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProgressWaitsForTheDelay(t *testing.T) {
	// In a synctest bubble, synctest.Wait returns once the progress
	// goroutine is blocked (on the delay timer or the ticker of the fake
	// clock), so what it drew after a clock step is all it will draw.
	synctest.Test(t, testProgressWaitsForTheDelay)
}

func testProgressWaitsForTheDelay(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	var out syncBuffer
	p := newProgress(&out, "fsck", 40, clk, progressDelay)
	t.Cleanup(p.stop) // a failed check must not leave the goroutine in the bubble
	p.phase("checking 100000 entries in image_manager/", 0)
	synctest.Wait()
	if !clk.HasWaiters() {
		t.Fatal("no delay timer on the clock")
	}
	// Work shorter than the delay shows nothing.
	clk.Step(progressDelay - time.Millisecond)
	synctest.Wait()
	if out.String() != "" {
		t.Fatalf("before the delay: %q", out.String())
	}
	clk.Step(time.Millisecond)
	synctest.Wait()
	if !strings.Contains(out.String(), "fsck: checking") {
		t.Fatalf("at the delay: %q, want the first line", out.String())
	}
	// The line fits the terminal (40 columns) and counts the time.
	line := out.String()[strings.LastIndex(out.String(), "\r\x1b[K")+len("\r\x1b[K"):]
	if n := len([]rune(line)); n > 39 {
		t.Errorf("line %q is %d columns wide on a 40-column terminal", line, n)
	}
	p.phase("pruning records", 3)
	p.step()
	clk.Step(progressInterval)
	synctest.Wait()
	if !strings.Contains(out.String(), "fsck: pruning records 1/3 (1s)") {
		t.Errorf("after a tick: %q, want the count", out.String())
	}
	var warn bytes.Buffer
	p.println(&warn, "pullrecords: warning: something")
	if warn.String() != "pullrecords: warning: something\n" {
		t.Errorf("warning = %q", warn.String())
	}
	p.stop()
	p.stop() // twice is fine
	if !strings.HasSuffix(out.String(), "\r\x1b[K") {
		t.Errorf("the line is not erased at the end: %q", out.String())
	}
}

func TestProgressStoppedEarlyPrintsNothing(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var out syncBuffer
	p := newProgress(&out, "migrate", 80, clk, progressDelay)
	p.phase("looking", 0)
	p.stop()
	if out.String() != "" {
		t.Errorf("output = %q, want nothing", out.String())
	}
}

func TestNilProgress(t *testing.T) {
	var p *workProgress
	p.phase("x", 1)
	p.step()
	p.stop()
	var b bytes.Buffer
	p.println(&b, "line")
	if b.String() != "line\n" {
		t.Errorf("println = %q", b.String())
	}
}

func TestStartProgressNeedsATerminal(t *testing.T) {
	g := &globalOptions{stderr: &bytes.Buffer{}}
	if p := g.startProgress("fsck"); p != nil {
		p.stop()
		t.Error("a progress line on a buffer")
	}
}
