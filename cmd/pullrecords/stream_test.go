package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

// Strings that exercise escaping, shortening, wrapping and YAML quoting.
var oddPieces = []string{
	"registry.example.com/team-a/api", "sha256:", strings.Repeat("0123456789abcdef", 4), "ab12",
	"x", "<&>", "\x1b[31m", "\n", "\t", "\u202e", "é", "日本語", "true", "null", "123", "- x", ": y",
	"#", "'q'", `"dq"`, " lead", "trail ", "\x7f", "\u0085", "word word word word", "",
	strings.Repeat("0123456789abcdef", 2), "ABCDEF" + strings.Repeat("a", 40),
}

func oddString(r *rand.Rand, maxPieces int) string {
	var b strings.Builder
	for range 1 + r.IntN(maxPieces) {
		b.WriteString(oddPieces[r.IntN(len(oddPieces))])
	}
	return b.String()
}

func streamColumns() [][]column {
	return [][]column{
		{ // ls
			{header: "KIND"},
			{header: "KEY", hex: true, fit: fitMiddle, min: 20},
			{header: "NAMES", fit: fitMiddle, min: 16},
			{header: "CREDENTIALS", fit: fitEnd, min: 16},
			{header: "UPDATED"},
		},
		{ // with a wrapped column and narrow minimums
			{header: "A", fit: fitWrap, min: 6},
			{header: "B", hex: true, fit: fitMiddle},
			{header: "C", fit: fitEnd, min: 4},
		},
	}
}

func streamed(cols []column, s tableStyle, rows [][]string) string {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	st := newStreamTable(w, s, cols...)
	for _, r := range rows {
		if err := st.add(r...); err != nil {
			panic(err)
		}
	}
	if err := st.flush(); err != nil {
		panic(err)
	}
	return buf.String()
}

// A streamed table of at most one block prints the bytes table.write prints
// for the whole table, in every style.
func TestStreamTableMatchesTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	styles := []tableStyle{{}, {wide: true}, {noHeaders: true}, {wide: true, noHeaders: true}}
	for i := range 300 {
		cols := streamColumns()[i%2]
		n := []int{0, 1, 2, 7, 40, streamBlock}[i%6]
		rows := make([][]string, n)
		for j := range rows {
			for range cols {
				rows[j] = append(rows[j], oddString(r, 1+i%9))
			}
		}
		for _, s := range styles {
			tb := newTable(cols...)
			for _, row := range rows {
				tb.add(row...)
			}
			var want bytes.Buffer
			if err := tb.write(&want, s); err != nil {
				t.Fatal(err)
			}
			if got := streamed(cols, s, rows); got != want.String() {
				t.Fatalf("table %d (%d rows, %+v):\n%s", i, n, s, cmp.Diff(want.String(), got))
			}
		}
	}
}

// Past the first block, a fitted table still fits, keeps every row and
// never narrows a column it printed wider.
func TestStreamTableManyBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cols := streamColumns()[0]
	var rows [][]string
	for i := range 3*streamBlock + 17 {
		key := fmt.Sprintf("sha256:%064x", i)
		if i > 2*streamBlock {
			key = oddString(r, 12) // wider keys, late
		}
		rows = append(rows, []string{"record", key, oddString(r, 4), oddString(r, 6), "2026-03-02T09:00:00Z"})
	}
	out := streamed(cols, tableStyle{}, rows)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(rows)+1 {
		t.Fatalf("%d lines, want %d", len(lines), len(rows)+1)
	}
	for _, l := range lines {
		if n := runes(l); n > tableWidth {
			t.Errorf("line %q is %d wide", l, n)
		}
	}
	wide := streamed(cols, tableStyle{wide: true}, rows)
	for i, l := range strings.Split(strings.TrimSuffix(wide, "\n"), "\n")[1:] {
		if !strings.Contains(l, esc(rows[i][1])) {
			t.Fatalf("wide row %d %q lost its key %q", i, l, esc(rows[i][1]))
		}
	}
}

// The fast helpers of the streamed table give what the table's give.
func TestStreamHelpersMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		s := oddString(r, 8)
		if plainASCII(s) && esc(s) != s {
			t.Fatalf("plainASCII(%q) but esc changes it", s)
		}
		if width(s) != runes(s) {
			t.Fatalf("width(%q) = %d, runes %d", s, width(s), runes(s))
		}
		if got, want := shortHexRuns(s), shortHex(s); got != want {
			t.Fatalf("shortHexRuns(%q) = %q, shortHex %q", s, got, want)
		}
		for _, f := range []fit{fitNone, fitMiddle, fitEnd, fitWrap} {
			w := 4 + r.IntN(40)
			if got, want := fitCellASCII(s, w, f), fitCell(s, w, f); !slices.Equal(got, want) {
				t.Fatalf("fitCellASCII(%q, %d, %d) = %q, fitCell %q", s, w, f, got, want)
			}
		}
	}
}

// lsFixture writes n records and m intents with odd strings, plus one
// unreadable file, and returns the kubelet directory.
func lsFixture(t *testing.T, n, m int) string {
	t.Helper()
	dir := t.TempDir()
	pulled := filepath.Join(dir, fsstore.DirName, fsstore.RecordsDir)
	pulling := filepath.Join(dir, fsstore.DirName, fsstore.IntentsDir)
	for _, d := range []string{pulled, pulling} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	write := func(d, key string, data []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fsstore.FileName(key)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		rec := &accessor.ImagePulledRecord{
			ImageRef:          fmt.Sprintf("sha256:%064x", r.Uint64()),
			LastUpdatedTime:   accessor.StorageTime(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)),
			CredentialMapping: map[string]accessor.ImagePullCredentials{},
		}
		if i%5 == 0 {
			rec.ImageRef = fmt.Sprintf("%s-%d", oddString(r, 3), i)
		}
		for j := range i % 3 {
			c := accessor.ImagePullCredentials{NodePodsAccessible: j == 2}
			if j == 0 {
				c.KubernetesSecrets = []accessor.ImagePullSecret{{UID: oddString(r, 2), Namespace: oddString(r, 2), Name: oddString(r, 3), CredentialHash: fmt.Sprintf("%064x", r.Uint64())}}
			} else {
				c.KubernetesServiceAccounts = []accessor.ImagePullServiceAccount{{UID: "u", Namespace: oddString(r, 2), Name: oddString(r, 2)}}
			}
			rec.CredentialMapping[fmt.Sprintf("%s/%d", oddString(r, 4), j)] = c
		}
		data, err := accessor.EncodePulledRecord(rec)
		write(pulled, rec.ImageRef, data, err)
	}
	for i := range m {
		img := fmt.Sprintf("%s:%d", oddString(r, 4), i)
		data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: img})
		write(pulling, img, data, err)
	}
	write(pulled, "sha256:torn", []byte(`{"kind":"ImagePulledRecord"`), nil)
	return dir
}

// wantLs is what ls printed when it read the whole store first: every
// readable record and intent, sorted by key.
func wantLs(t *testing.T, dir string) lsOutput {
	t.Helper()
	s, err := fsstore.New(logr.Discard(), dir, fsstore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := lsOutput{Intents: []intentView{}, Records: []recordView{}}
	intents, ierr := s.ListImagePullIntents()
	records, rerr := s.ListImagePulledRecords()
	for _, err := range []error{ierr, rerr} {
		var le *accessor.ListError
		if err != nil && !errors.As(err, &le) {
			t.Fatal(err)
		}
		if le != nil {
			out.Unreadable += len(le.Errs)
		}
	}
	slices.SortFunc(intents, func(a, b *accessor.ImagePullIntent) int { return strings.Compare(a.Image, b.Image) })
	slices.SortFunc(records, func(a, b *accessor.ImagePulledRecord) int { return strings.Compare(a.ImageRef, b.ImageRef) })
	for _, i := range intents {
		out.Intents = append(out.Intents, viewIntent(i))
	}
	for _, r := range records {
		out.Records = append(out.Records, viewRecord(r))
	}
	return out
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// ls -o json and -o yaml, written one element at a time, print the bytes the
// whole document encodes to, over several blocks of elements and with
// strings that need escaping and quoting; so do empty lists.
func TestLsStructuredOutputMatchesWholeDocument(t *testing.T) {
	for _, size := range []struct{ records, intents int }{{0, 0}, {1, 0}, {0, 3}, {3*encodeBlock + 5, 40}} {
		t.Run(fmt.Sprintf("records=%d/intents=%d", size.records, size.intents), func(t *testing.T) {
			dir := lsFixture(t, size.records, size.intents)
			want := wantLs(t, dir)
			var wantJSON bytes.Buffer
			enc := json.NewEncoder(&wantJSON)
			enc.SetIndent("", "  ")
			if err := enc.Encode(want); err != nil {
				t.Fatal(err)
			}
			wantYAML, err := marshalYAML(want)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct{ format, want string }{{"json", wantJSON.String()}, {"yaml", string(wantYAML)}} {
				got, stderr, code := runCLI(t, "--kubelet-dir", dir, "-o", tc.format, "ls")
				if code != 0 {
					t.Fatalf("-o %s: exit %d: %s", tc.format, code, stderr)
				}
				if got != tc.want {
					t.Errorf("-o %s differs from the whole document (-want +got):\n%s", tc.format, cmp.Diff(tc.want, got))
				}
			}
		})
	}
}

// ls --sort key (the default) lists by key; --sort file lists the same rows
// in file-name order.
func TestLsSortOrders(t *testing.T) {
	dir := lsFixture(t, 700, 30)
	want := wantLs(t, dir)
	keyOut, _, code := runCLI(t, "--kubelet-dir", dir, "-o", "json", "ls")
	if code != 0 {
		t.Fatal(code)
	}
	fileOut, _, code := runCLI(t, "--kubelet-dir", dir, "-o", "json", "ls", "--sort", "file")
	if code != 0 {
		t.Fatal(code)
	}
	var byKey, byFile lsOutput
	if err := json.Unmarshal([]byte(keyOut), &byKey); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(fileOut), &byFile); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, byKey); diff != "" {
		t.Errorf("--sort key (-want +got):\n%s", diff)
	}
	slices.SortFunc(want.Records, func(a, b recordView) int { return strings.Compare(a.File, b.File) })
	slices.SortFunc(want.Intents, func(a, b intentView) int { return strings.Compare(a.File, b.File) })
	if diff := cmp.Diff(want, byFile); diff != "" {
		t.Errorf("--sort file (-want +got):\n%s", diff)
	}
	// Tables too: the same rows (padded to other widths: the blocks hold
	// other rows), in the two orders.
	keyTable, _, _ := runCLI(t, "--kubelet-dir", dir, "-o", "wide", "ls", "--no-headers")
	fileTable, _, _ := runCLI(t, "--kubelet-dir", dir, "-o", "wide", "ls", "--no-headers", "--sort", "file")
	rows := func(out string) []string {
		var rs []string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			rs = append(rs, strings.Join(strings.Fields(l), " "))
		}
		return rs
	}
	k, f := rows(keyTable), rows(fileTable)
	if len(k) != len(want.Records)+len(want.Intents) {
		t.Errorf("%d table rows, want %d", len(k), len(want.Records)+len(want.Intents))
	}
	var wantRows []string
	for _, i := range want.Intents {
		wantRows = append(wantRows, "intent "+esc(i.Image))
	}
	for _, r := range want.Records {
		wantRows = append(wantRows, "record "+esc(r.ImageRef))
	}
	for i := range min(len(f), len(wantRows)) {
		if !strings.HasPrefix(f[i], strings.Join(strings.Fields(wantRows[i]), " ")) {
			t.Fatalf("--sort file row %d is %q, want the row of %q", i, f[i], wantRows[i])
		}
	}
	slices.Sort(k)
	slices.Sort(f)
	if !slices.Equal(k, f) {
		t.Error("the two orders print different rows")
	}
}

// removeOnFirstWrite is ls's stdout for TestLsStreams: at its first write
// it removes every record file, so that only rows read before ls printed
// anything, and the read-ahead, can be printed.
type removeOnFirstWrite struct {
	t       *testing.T
	dir     string
	removed bool
	buf     bytes.Buffer
}

func (w *removeOnFirstWrite) Write(p []byte) (int, error) {
	if !w.removed {
		w.removed = true
		entries, err := os.ReadDir(w.dir)
		if err != nil {
			w.t.Error(err)
		}
		for _, e := range entries {
			if err := os.Remove(filepath.Join(w.dir, e.Name())); err != nil {
				w.t.Error(err)
			}
		}
	}
	return w.buf.Write(p)
}

// ls prints rows while it reads: when every file is removed at its first
// output, most rows are never printed. (It does not read everything, then
// print.) Both orders; the key order's first pass reads every file, so only
// its second pass streams.
func TestLsStreams(t *testing.T) {
	// What may be printed after the removal: the rest of the block being
	// printed (a table block, or a block of encoded elements) and what the
	// walk read ahead (two blocks of 256 per worker, and the one in hand).
	limit := streamBlock + encodeBlock + (2*runtime.GOMAXPROCS(0)+1)*256
	n := 2 * limit
	for _, tc := range []struct{ name, format, sort, row string }{
		{"table/key", "table", "key", "\nrecord "}, {"table/file", "table", "file", "\nrecord "},
		{"json/key", "json", "key", `"imageRef": `}, {"yaml/file", "yaml", "file", "imageRef: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := lsFixture(t, n, 0)
			w := &removeOnFirstWrite{t: t, dir: filepath.Join(dir, fsstore.DirName, fsstore.RecordsDir)}
			var stderr bytes.Buffer
			if code := run(context.Background(), []string{"--kubelet-dir", dir, "-o", tc.format, "ls", "--sort", tc.sort}, w, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			printed := strings.Count(w.buf.String(), tc.row)
			if printed == 0 || printed > limit {
				t.Errorf("%d of %d records printed after the files were removed at the first output, want 1 to %d", printed, n, limit)
			}
		})
	}
}
