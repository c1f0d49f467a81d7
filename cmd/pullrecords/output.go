package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	goyaml "sigs.k8s.io/yaml/goyaml.v2"
)

type format string

const (
	formatTable format = "table"
	formatJSON  format = "json"
	formatYAML  format = "yaml"
	// formatWide is the table with every cell in full; parseFormat
	// returns formatTable for it (tableStyle tells them apart).
	formatWide format = "wide"
)

// outputFormats are the values of -o.
var outputFormats = []string{string(formatTable), string(formatWide), string(formatJSON), string(formatYAML)}

func parseFormat(s string) (format, error) {
	switch f := format(strings.ToLower(s)); f {
	case formatTable, formatJSON, formatYAML:
		return f, nil
	case formatWide:
		return formatTable, nil
	default:
		return "", usageErrorf("-o %q: want one of %s", s, strings.Join(outputFormats, ", "))
	}
}

// style is how tables are printed: -o wide prints every cell in full,
// --no-headers leaves the header row out.
func (g *globalOptions) style() tableStyle {
	return tableStyle{wide: strings.EqualFold(g.output, string(formatWide)), noHeaders: g.noHeaders}
}

// emit writes v as JSON or YAML, or calls table for the table format.
func (g *globalOptions) emit(v any, table func(w io.Writer) error) error {
	f, err := parseFormat(g.output)
	if err != nil {
		return err
	}
	switch f {
	case formatJSON:
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case formatYAML:
		data, err := marshalYAML(v)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(data)
		return err
	default:
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		if err := table(tw); err != nil {
			return err
		}
		return tw.Flush()
	}
}

// marshalYAML writes v as sigs.k8s.io/yaml.Marshal does (through its JSON
// form, keys sorted) but never parses JSON text as YAML, which rejects the
// raw DEL and C1 characters encoding/json leaves unescaped: the JSON form is
// decoded with encoding/json, and the emitter writes every string exactly,
// double-quoted with escapes where it must.
func marshalYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return goyaml.Marshal(yamlNumbers(obj))
}

// yamlNumbers turns json.Numbers into int64 or float64, as YAML numbers.
func yamlNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = yamlNumbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = yamlNumbers(e)
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return string(t)
	}
	return v
}

// row writes tab-separated cells and a newline, each cell escaped (esc).
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = esc(c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// esc makes s safe to print on a terminal: every control character (C0
// including tab and newline, DEL, C1), every Unicode line or paragraph
// separator and bidirectional-text control, and every invalid UTF-8 byte are
// written as Go escapes (\x1b, \n, \u202e, \xff), so a key or an image
// string in a record cannot move the cursor, recolour the screen, break a
// table row or reorder what is shown. Everything else, backslashes included,
// is kept: the escaping is for reading, and JSON or YAML output is exact.
// Every text output (tables, summaries, progress lines, error lines) uses
// it for strings that come from records, files or the runtime; JSON and
// YAML output is left exact.
func esc(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r < 0x20 || r == 0x7f || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafeRune reports the non-ASCII runes esc escapes: C1 controls, line and
// paragraph separators, and bidirectional-text controls.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
