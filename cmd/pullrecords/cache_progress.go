package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/pullrecords/pullrecords/imagecache"
)

// runPrinter prints what "cache run" does. Every result and every completed
// batch is a line of its own, so nothing scrolls away: on a terminal a
// progress line stays at the bottom, and each new line is written above it
// (the progress line is cleared, the line written, the progress line drawn
// again). Elsewhere there is no progress line. With -o json every line is a
// JSON object.
type runPrinter struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	json     bool
	width    func() int
	// pending returns the requests queued or in flight; set once the
	// manager exists.
	pending func() int

	counts map[imagecache.ImageWorkStatus]int
	failed int
	shown  bool // a progress line is on screen
	idle   string
}

func newRunPrinter(w io.Writer, jsonLines bool) *runPrinter {
	p := &runPrinter{w: w, json: jsonLines, counts: map[imagecache.ImageWorkStatus]int{}, width: func() int { return 80 }}
	if f, ok := w.(*os.File); ok && !jsonLines && isTerminal(f) {
		p.terminal = true
		p.width = func() int { return terminalWidth(f) }
	}
	return p
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// terminalWidth asks the terminal for its width (TIOCGWINSZ); 80 if it
// does not say.
func terminalWidth(f *os.File) int {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 || ws.Col == 0 {
		return 80
	}
	return int(ws.Col)
}

// jsonEvent is one line of "cache run -o json".
type jsonEvent struct {
	Kind     string         `json:"kind"` // result, batch, note
	Time     time.Time      `json:"time"`
	Cache    string         `json:"cache,omitempty"`
	WorkType string         `json:"workType,omitempty"`
	Image    string         `json:"image,omitempty"`
	Status   string         `json:"status,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Message  string         `json:"message,omitempty"`
	ImageRef string         `json:"imageRef,omitempty"`
	Batch    uint64         `json:"batch,omitempty"`
	Requests int            `json:"requests,omitempty"`
	Counts   map[string]int `json:"counts,omitempty"`
	Duration string         `json:"duration,omitempty"`
}

// resultFailed reports whether a result counts as a failure: failed, or
// unknown because the run stopped; work superseded by a later change of the
// cache did not fail, it was no longer wanted.
func resultFailed(r imagecache.ImageWorkResult) bool {
	switch r.Status {
	case imagecache.StatusFailed:
		return true
	case imagecache.StatusUnknown:
		return r.Reason != imagecache.ReasonSuperseded
	}
	return false
}

// resultLine is the text line of a result.
func resultLine(r imagecache.ImageWorkResult) string {
	line := fmt.Sprintf("%-13s %-8s %s %s %s", r.Status, r.Request.WorkType, esc(r.Request.ImageCache.String()), esc(r.Request.Image), r.Reason)
	if r.Message != "" && r.Status != imagecache.StatusSucceeded && r.Status != imagecache.StatusAlreadyPulled {
		line += ": " + esc(r.Message)
	}
	return line
}

func (p *runPrinter) result(r imagecache.ImageWorkResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[r.Status]++
	if resultFailed(r) {
		p.failed++
	}
	if p.json {
		p.writeJSON(jsonEvent{Kind: "result", Time: r.Finished.UTC(), Cache: r.Request.ImageCache.String(), WorkType: string(r.Request.WorkType),
			Image: r.Request.Image, Status: string(r.Status), Reason: r.Reason, Message: r.Message, ImageRef: r.ImageRef})
		return
	}
	p.lineLocked(resultLine(r))
}

func (p *runPrinter) status(s imagecache.CacheStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		counts := map[string]int{}
		for k, v := range s.Counts {
			counts[string(k)] = v
		}
		p.writeJSON(jsonEvent{Kind: "batch", Time: s.Finished.UTC(), Cache: s.ImageCache.String(), WorkType: string(s.WorkType),
			Batch: s.Batch, Requests: s.Requests, Counts: counts, Duration: s.Duration.Round(time.Millisecond).String()})
		return
	}
	p.lineLocked(fmt.Sprintf("%s %s batch %d complete: %s in %s", esc(s.ImageCache.String()), s.WorkType, s.Batch,
		plural(s.Requests, "request"), s.Duration.Round(time.Millisecond)))
}

// note prints a line about the run itself (a change picked up, a file
// ignored).
func (p *runPrinter) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if p.json {
		p.writeJSON(jsonEvent{Kind: "note", Time: time.Now().UTC(), Message: msg})
		return
	}
	p.lineLocked(esc(msg))
}

// setIdle sets what the progress line says when nothing is pending.
func (p *runPrinter) setIdle(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = s
	p.drawLocked()
}

// refresh redraws the progress line (the pending count changes without a
// result).
func (p *runPrinter) refresh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawLocked()
}

// close removes the progress line; what was printed above it stays.
func (p *runPrinter) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

func (p *runPrinter) failures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

func (p *runPrinter) writeJSON(e jsonEvent) {
	data, err := json.Marshal(e)
	if err != nil {
		return
	}
	p.w.Write(append(data, '\n'))
}

// lineLocked prints a permanent line, above the progress line on a
// terminal.
func (p *runPrinter) lineLocked(line string) {
	if p.terminal && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
	fmt.Fprintln(p.w, line)
	p.drawLocked()
}

// drawLocked writes the progress line on a terminal, cut to its width so
// it never wraps (a wrapped line could not be cleared).
func (p *runPrinter) drawLocked() {
	if !p.terminal {
		return
	}
	pending := 0
	if p.pending != nil {
		pending = p.pending()
	}
	line := fmt.Sprintf("[%d succeeded, %d already present, %d failed]", p.counts[imagecache.StatusSucceeded],
		p.counts[imagecache.StatusAlreadyPulled], p.failed)
	if pending > 0 {
		line = fmt.Sprintf("working: %s pending %s", plural(pending, "request"), line)
	} else if p.idle != "" {
		line = p.idle + " " + line
	}
	if w := p.width() - 1; utf8.RuneCountInString(line) > w && w > 0 {
		line = string([]rune(line)[:w])
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
	p.shown = true
}
