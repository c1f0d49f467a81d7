package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/fsstore"
)

// A progress line is shown on stderr, when stderr is a terminal, for work
// that runs longer than progressDelay, redrawn every progressInterval and
// erased when the work ends, so that it never mixes with the output on
// stdout and the result lines stay on the screen.
const (
	progressDelay    = time.Second
	progressInterval = 200 * time.Millisecond
	// envProgressDelay sets progressDelay (a Go duration); the tests use
	// it to show the line for work that takes less than a second.
	envProgressDelay = "PULLRECORDS_PROGRESS_DELAY"
)

// workProgress is a self-updating status line. A nil *workProgress does nothing.
type workProgress struct {
	w     io.Writer
	what  string
	clk   clock.WithTicker
	start time.Time
	width int

	mu    sync.Mutex
	msg   string
	done  int
	total int // 0: no count shown
	spin  int
	shown bool
	// live is set once the delay has passed: from then on every phase
	// change is drawn at once.
	live bool

	stopOnce sync.Once
	stopCh   chan struct{}
	wg       sync.WaitGroup
}

// startProgress starts the progress line of command what on stderr, or
// returns nil when stderr is not a terminal (or TERM is dumb).
func (g *globalOptions) startProgress(what string) *workProgress {
	ok, width := terminal(g.stderr)
	if !ok || os.Getenv("TERM") == "dumb" {
		return nil
	}
	delay := progressDelay
	if d, err := time.ParseDuration(os.Getenv(envProgressDelay)); err == nil && d >= 0 {
		delay = d
	}
	return newProgress(g.stderr, what, width, clock.RealClock{}, delay)
}

func newProgress(w io.Writer, what string, width int, clk clock.WithTicker, delay time.Duration) *workProgress {
	if width <= 0 {
		width = 80
	}
	p := &workProgress{w: w, what: what, clk: clk, start: clk.Now(), width: width, stopCh: make(chan struct{})}
	p.wg.Add(1)
	go p.run(delay)
	return p
}

func (p *workProgress) run(delay time.Duration) {
	defer p.wg.Done()
	if delay > 0 {
		t := p.clk.NewTimer(delay)
		select {
		case <-p.stopCh:
			t.Stop()
			return
		case <-t.C():
		}
	}
	tick := p.clk.NewTicker(progressInterval)
	defer tick.Stop()
	p.mu.Lock()
	p.live = true
	p.mu.Unlock()
	for {
		p.draw()
		select {
		case <-p.stopCh:
			return
		case <-tick.C():
		}
	}
}

// phase says what the work does now; total > 0 shows a count done/total,
// advanced by step.
func (p *workProgress) phase(msg string, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msg, p.done, p.total = msg, 0, total
	if p.live {
		p.drawLocked()
	}
}

// step counts one more unit of the current phase done.
func (p *workProgress) step() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done++
	p.mu.Unlock()
}

// line is the progress line, without terminal controls.
func (p *workProgress) line() string {
	spinner := `|/-\`
	s := fmt.Sprintf("%c %s: %s", spinner[p.spin%len(spinner)], p.what, p.msg)
	if p.total > 0 {
		s += fmt.Sprintf(" %d/%d", p.done, p.total)
	}
	s += fmt.Sprintf(" (%s)", p.clk.Since(p.start).Truncate(time.Second))
	if r := []rune(s); len(r) > p.width-1 {
		s = string(r[:p.width-2]) + "…"
	}
	return s
}

func (p *workProgress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawLocked()
}

// drawLocked draws the line, once there is something to say.
func (p *workProgress) drawLocked() {
	if p.msg == "" {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", p.line())
	p.spin++
	p.shown = true
}

// clearLocked erases the line if it is shown.
func (p *workProgress) clearLocked() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// println writes line to w (stderr, for a warning) without garbling the
// progress line: the line is erased first and drawn again below it.
func (p *workProgress) println(w io.Writer, line string) {
	if p == nil {
		fmt.Fprintln(w, line)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintln(w, line)
	if p.live {
		p.drawLocked()
	}
}

// stop ends the progress line and erases it. It may be called more than once.
func (p *workProgress) stop() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() {
		close(p.stopCh)
		p.wg.Wait()
		p.mu.Lock()
		p.clearLocked()
		p.live = false
		p.mu.Unlock()
	})
}

// countEntries counts the entries of image_manager/{pulling,pulled} under
// kubeletDir, for the progress line (0 if they cannot be read).
func countEntries(kubeletDir string) int {
	n := 0
	for _, sub := range []string{fsstore.IntentsDir, fsstore.RecordsDir} {
		f, err := os.Open(filepath.Join(kubeletDir, fsstore.DirName, sub))
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		n += len(names)
	}
	return n
}
