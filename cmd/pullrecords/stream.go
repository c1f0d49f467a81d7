package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// streamBlock is how many rows a streamed table lays out and prints at a
// time.
const streamBlock = 512

// streamTable prints a table a block of rows at a time, so that the first
// rows are on the screen before the last ones are known, and holds one block
// at most. The first block is laid out as table.write lays out a whole
// table: a table of at most streamBlock rows prints exactly the same bytes.
// Later blocks keep the widths printed so far, widening a column only for a
// row that needs it and only within the width (-o wide: without limit), and
// shorten hex digests once an earlier block had to; a cell wider than its
// column is shortened the way its column shortens (fit).
type streamTable struct {
	w       *bufio.Writer
	cols    []column
	width   int // 0: every cell in full
	headers bool
	rows    [][]string
	started bool  // the first block is printed
	ws      []int // the widths printed so far
	short   bool  // hex runs are shortened
}

func newStreamTable(w *bufio.Writer, s tableStyle, cols ...column) *streamTable {
	t := &streamTable{w: w, cols: cols, width: tableWidth, headers: !s.noHeaders, ws: make([]int, len(cols))}
	if s.wide {
		t.width = 0
	}
	return t
}

// add appends a row, escaping its cells (esc), and prints the block when it
// is full.
func (t *streamTable) add(cells ...string) error {
	r := make([]string, len(t.cols))
	for i := range r {
		if i < len(cells) {
			r[i] = cells[i]
			if !plainASCII(r[i]) {
				r[i] = esc(r[i])
			}
		}
	}
	t.rows = append(t.rows, r)
	if len(t.rows) >= streamBlock {
		return t.flush()
	}
	return nil
}

// flush prints the rows held, the header row first if it is not printed
// yet, and flushes w. The header row of an empty table is printed too.
func (t *streamTable) flush() error {
	if t.started && len(t.rows) == 0 {
		return t.w.Flush()
	}
	rows := t.rows
	first := 0
	if !t.started && t.headers {
		h := make([]string, len(t.cols))
		for i, c := range t.cols {
			h[i] = c.header
		}
		rows = append([][]string{h}, rows...)
		first = 1
	}
	t.layout(rows, first)
	for _, r := range rows {
		t.writeRow(r)
	}
	t.started = true
	t.rows = t.rows[:0]
	return t.w.Flush()
}

// layout widens t.ws for rows (rows[first:] are data rows) and narrows it
// to the width as table.lines does, never below what earlier blocks printed.
func (t *streamTable) layout(rows [][]string, first int) {
	prev := slices.Clone(t.ws)
	shorten := func() {
		for i, c := range t.cols {
			if c.hex {
				for _, r := range rows[first:] {
					r[i] = shortHexRuns(r[i])
				}
			}
		}
	}
	widths := func() []int {
		ws := slices.Clone(prev)
		for _, r := range rows {
			for i, c := range r {
				ws[i] = max(ws[i], width(c))
			}
		}
		return ws
	}
	if t.short {
		shorten()
	}
	ws := widths()
	if t.width > 0 && columnsWidth(ws) > t.width {
		if !t.short {
			t.short = true
			shorten()
			ws = widths()
		}
		narrowest := make([]int, len(t.cols))
		for i, c := range t.cols {
			narrowest[i] = max(c.min, runes(c.header), 4, prev[i])
		}
		narrow(t.cols, ws, narrowest, t.width)
	}
	t.ws = ws
}

// writeRow prints one row in the widths t.ws, on as many lines as its
// tallest cell needs, without trailing blanks.
func (t *streamTable) writeRow(r []string) {
	cells := make([][]string, len(r))
	height := 1
	for i, c := range r {
		cells[i] = fitCellASCII(c, t.ws[i], t.cols[i].fit)
		height = max(height, len(cells[i]))
	}
	writeRowLines(t.w, cells, height, t.ws, width)
}

// The helpers below give what esc's check, shortHex, runes and fitCell give,
// without a regular expression or a rune slice for the ASCII text nearly
// every cell is (TestStreamHelpersMatch holds them to it).

// plainASCII reports whether s is printable ASCII only, which esc leaves
// as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// width is runes(s).
func width(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return utf8.RuneCountInString(s)
		}
	}
	return len(s)
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// shortHexRuns is shortHex: every run of 32 or more lowercase hex digits
// becomes its first 12 and "…".
func shortHexRuns(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		if !isLowerHex(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isLowerHex(s[j]) {
			j++
		}
		if j-i >= 32 {
			b.WriteString(s[done : i+12])
			b.WriteString("…")
			done = j
		}
		i = j
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// fitCellASCII is fitCell, without converting an ASCII cell to runes.
func fitCellASCII(s string, w int, f fit) []string {
	if width(s) <= w {
		return []string{s}
	}
	if len(s) != width(s) || f == fitWrap || f == fitNone {
		return fitCell(s, w, f)
	}
	switch f {
	case fitMiddle:
		head := (w - 1) / 3
		tail := w - 1 - head
		return []string{s[:head] + "…" + s[len(s)-tail:]}
	default: // fitEnd
		return []string{s[:w-1] + "…"}
	}
}

const spaces = "                                                                "

// pad writes n spaces.
func pad(w io.StringWriter, n int) {
	for n > len(spaces) {
		w.WriteString(spaces)
		n -= len(spaces)
	}
	w.WriteString(spaces[:n])
}

// encodeBlock is how many list elements are encoded at a time.
const encodeBlock = 256

// blockList encodes the elements of a list a block at a time, on one
// goroutine per core, and writes the encodings in order: the encoders
// (goyaml above all) cost more than reading the files.
type blockList struct {
	encode  func(any) ([]byte, error)
	write   func(n int, data []byte) error // n counts the elements written before
	pending []any
	n       int
}

func (l *blockList) add(v any) error {
	l.pending = append(l.pending, v)
	if len(l.pending) >= encodeBlock {
		return l.flush()
	}
	return nil
}

func (l *blockList) flush() error {
	out := make([][]byte, len(l.pending))
	errs := make([]error, len(l.pending))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(l.pending)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(l.pending) {
					return
				}
				out[i], errs[i] = l.encode(l.pending[i])
			}
		})
	}
	wg.Wait()
	clear(l.pending)
	l.pending = l.pending[:0]
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, data := range out {
		if err := l.write(l.n, data); err != nil {
			return err
		}
		l.n++
	}
	return nil
}

// jsonObject writes a JSON object whose members are written one after the
// other, lists one element at a time, in the bytes json.Encoder with a
// two-space indent writes for the whole object.
type jsonObject struct {
	w       *bufio.Writer
	members int
	list    *blockList
}

func newJSONObject(w *bufio.Writer) *jsonObject {
	w.WriteString("{")
	return &jsonObject{w: w}
}

func (o *jsonObject) key(name string) error {
	if o.members > 0 {
		o.w.WriteString(",")
	}
	o.members++
	k, err := json.Marshal(name)
	if err != nil {
		return err
	}
	o.w.WriteString("\n  ")
	o.w.Write(k)
	o.w.WriteString(": ")
	return nil
}

// beginList starts the member name, a list.
func (o *jsonObject) beginList(name string) error {
	if err := o.key(name); err != nil {
		return err
	}
	o.w.WriteString("[")
	o.list = &blockList{
		encode: func(v any) ([]byte, error) { return json.MarshalIndent(v, "    ", "  ") },
		write: func(n int, data []byte) error {
			if n > 0 {
				o.w.WriteString(",")
			}
			o.w.WriteString("\n    ")
			_, err := o.w.Write(data)
			return err
		},
	}
	return nil
}

// item appends v to the list begun last.
func (o *jsonObject) item(v any) error { return o.list.add(v) }

func (o *jsonObject) endList() error {
	if err := o.list.flush(); err != nil {
		return err
	}
	if o.list.n > 0 {
		o.w.WriteString("\n  ")
	}
	o.w.WriteString("]")
	return nil
}

// value writes the member name with the value v (on one line: a number or
// a string).
func (o *jsonObject) value(name string, v any) error {
	if err := o.key(name); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = o.w.Write(data)
	return err
}

func (o *jsonObject) end() error {
	if o.members > 0 {
		o.w.WriteString("\n")
	}
	o.w.WriteString("}\n")
	return o.w.Flush()
}

// yamlList writes a top-level mapping member that is a list, one element
// at a time, in the bytes marshalYAML writes for the whole document (the
// caller writes the members in sorted order, as marshalYAML sorts them).
type yamlList struct {
	w    *bufio.Writer
	name string
	list *blockList
}

func newYAMLList(w *bufio.Writer, name string) *yamlList {
	l := &yamlList{w: w, name: name}
	l.list = &blockList{
		// A one-element sequence is the element as the document
		// lists it: goyaml does not indent a sequence in a mapping.
		encode: func(v any) ([]byte, error) { return marshalYAML([]any{v}) },
		write: func(n int, data []byte) error {
			if n == 0 {
				w.WriteString(name + ":\n")
			}
			_, err := w.Write(data)
			return err
		},
	}
	return l
}

func (l *yamlList) item(v any) error { return l.list.add(v) }

func (l *yamlList) end() error {
	if err := l.list.flush(); err != nil {
		return err
	}
	if l.list.n == 0 {
		l.w.WriteString(l.name + ": []\n")
	}
	return nil
}

// yamlValue writes a top-level mapping member with a scalar value.
func yamlValue(w io.Writer, name string, v any) error {
	data, err := marshalYAML(map[string]any{name: v})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
