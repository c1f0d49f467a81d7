package main

import (
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// tableWidth is the width, in columns, the tables of the default output fit
// into; -o wide prints every cell in full.
const tableWidth = 100

// colGap is the space between two columns.
const colGap = 2

// fit says how a column may be narrowed when a table is wider than
// tableWidth.
type fit int

const (
	// fitNone never narrows the column.
	fitNone fit = iota
	// fitMiddle elides the middle of a cell ("registr…com/team-a/api"):
	// image names and keys keep their start and their distinctive end.
	fitMiddle
	// fitEnd elides the end of a cell (free text: details, summaries).
	fitEnd
	// fitWrap wraps a cell onto more lines at spaces (explanations, where
	// every word counts).
	fitWrap
)

// column describes one column of a table.
type column struct {
	header string
	// hex shortens every run of 32 or more hex digits (a digest, a
	// credential hash, a record's file name) to its first 12 digits and
	// "…" when the table does not fit.
	hex bool
	fit fit
	// min is the narrowest a column that fits may become (at least its
	// header).
	min int
}

// table is rows of cells printed in aligned columns. Cells are escaped (esc)
// when added.
type table struct {
	cols []column
	rows [][]string
}

func newTable(cols ...column) *table { return &table{cols: cols} }

// add appends a row; missing cells are empty.
func (t *table) add(cells ...string) {
	r := make([]string, len(t.cols))
	for i := range r {
		if i < len(cells) {
			r[i] = esc(cells[i])
		}
	}
	t.rows = append(t.rows, r)
}

// tableStyle is how a command prints its tables: wide prints every cell in
// full; noHeaders leaves the header row out.
type tableStyle struct {
	wide      bool
	noHeaders bool
}

// write prints the table fitted into width columns (wide: not fitted).
func (t *table) write(w io.Writer, s tableStyle) error {
	width := tableWidth
	if s.wide {
		width = 0
	}
	var b strings.Builder
	for _, line := range t.lines(width, !s.noHeaders) {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var hexRun = regexp.MustCompile(`[0-9a-f]{32,}`)

// shortHex shortens every long run of hex digits in s to 12 digits and "…".
func shortHex(s string) string {
	return hexRun.ReplaceAllStringFunc(s, func(h string) string { return h[:12] + "…" })
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// columnsWidth is how many columns a table with column widths ws takes.
func columnsWidth(ws []int) int {
	n := colGap * (len(ws) - 1)
	for _, x := range ws {
		n += x
	}
	return n
}

// narrow shrinks ws one column at a time, always the column with the most
// room above its narrowest, until the table fits width or no column that
// may shrink is above its narrowest.
func narrow(cols []column, ws, narrowest []int, width int) {
	for columnsWidth(ws) > width {
		best := -1
		for i, c := range cols {
			if c.fit == fitNone || ws[i] <= narrowest[i] {
				continue
			}
			if best < 0 || ws[i]-narrowest[i] > ws[best]-narrowest[best] {
				best = i
			}
		}
		if best < 0 {
			return
		}
		ws[best]--
	}
}

// lines lays the table out, fitted into width columns when width > 0.
func (t *table) lines(width int, headers bool) []string {
	rows := make([][]string, 0, len(t.rows)+1)
	if headers {
		h := make([]string, len(t.cols))
		for i, c := range t.cols {
			h[i] = c.header
		}
		rows = append(rows, h)
	}
	for _, r := range t.rows {
		rows = append(rows, append([]string(nil), r...))
	}
	widths := func() []int {
		ws := make([]int, len(t.cols))
		for _, r := range rows {
			for i, c := range r {
				ws[i] = max(ws[i], runes(c))
			}
		}
		return ws
	}
	ws := widths()
	if width > 0 && columnsWidth(ws) > width {
		first := 0
		if headers {
			first = 1
		}
		for i, c := range t.cols {
			if c.hex {
				for _, r := range rows[first:] {
					r[i] = shortHex(r[i])
				}
			}
		}
		ws = widths()
		narrowest := make([]int, len(t.cols))
		for i, c := range t.cols {
			narrowest[i] = max(c.min, runes(c.header), 4)
		}
		narrow(t.cols, ws, narrowest, width)
	}
	var b strings.Builder
	for _, r := range rows {
		cells := make([][]string, len(r))
		height := 1
		for i, c := range r {
			cells[i] = fitCell(c, ws[i], t.cols[i].fit)
			height = max(height, len(cells[i]))
		}
		writeRowLines(&b, cells, height, ws, runes)
	}
	if b.Len() == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// writeRowLines writes a row whose cells are fitted already (cells[i] holds
// column i's lines) in the column widths ws, as height lines, each ended by
// a newline and without trailing blanks; width measures a cell's columns.
func writeRowLines(w io.StringWriter, cells [][]string, height int, ws []int, width func(string) int) {
	for l := range height {
		last := len(cells) - 1
		for last > 0 && (l >= len(cells[last]) || cells[last][l] == "") {
			last--
		}
		for i := 0; i <= last; i++ {
			c := ""
			if l < len(cells[i]) {
				c = cells[i][l]
			}
			w.WriteString(c)
			if i < last {
				pad(w, max(0, ws[i]-width(c))+colGap)
			}
		}
		w.WriteString("\n")
	}
}

// fitCell narrows s to at most w columns the way f says, as one or more
// lines.
func fitCell(s string, w int, f fit) []string {
	if runes(s) <= w {
		return []string{s}
	}
	r := []rune(s)
	switch f {
	case fitMiddle:
		// The end of a name tells most (the repository), so it keeps
		// two thirds.
		head := (w - 1) / 3
		tail := w - 1 - head
		return []string{string(r[:head]) + "…" + string(r[len(r)-tail:])}
	case fitEnd:
		return []string{string(r[:w-1]) + "…"}
	case fitWrap:
		return wrap(s, w)
	}
	return []string{s}
}

// wrap breaks s into lines of at most w columns at spaces, breaking a word
// longer than w where it must.
func wrap(s string, w int) []string {
	var lines []string
	var cur []rune
	for _, word := range strings.Fields(s) {
		wr := []rune(word)
		if len(cur) > 0 && len(cur)+1+len(wr) <= w {
			cur = append(append(cur, ' '), wr...)
			continue
		}
		if len(cur) > 0 {
			lines = append(lines, string(cur))
			cur = nil
		}
		for len(wr) > w {
			lines = append(lines, string(wr[:w]))
			wr = wr[w:]
		}
		cur = wr
	}
	if len(cur) > 0 || len(lines) == 0 {
		lines = append(lines, string(cur))
	}
	return lines
}
