package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTableFits(t *testing.T) {
	long := "sha256:" + strings.Repeat("ab", 32)
	tb := newTable(
		column{header: "KEY", hex: true, fit: fitMiddle, min: 20},
		column{header: "NAMES", fit: fitMiddle, min: 10},
		column{header: "DETAIL", fit: fitEnd, min: 10},
	)
	tb.add(long, "registry.example.com/team-a/api", strings.Repeat("word ", 20))
	tb.add("k\x1b", "n", "d")
	got := tb.lines(50, true)
	want := []string{
		"KEY                   NAMES          DETAIL",
		"sha256:abababababab…  regi…am-a/api  word word wo…",
		`k\x1b                 n              d`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fitted (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if n := runes(l); n > 50 {
			t.Errorf("line %q is %d wide", l, n)
		}
	}
	// Not fitted: every cell in full, no header with noHeaders.
	got = tb.lines(0, false)
	if !strings.HasPrefix(got[0], long+"  registry.example.com/team-a/api  word word") {
		t.Errorf("wide row = %q", got[0])
	}
	if len(got) != 2 {
		t.Errorf("%d lines without headers, want 2", len(got))
	}
}

func TestTableWraps(t *testing.T) {
	tb := newTable(column{header: "STEP"}, column{header: "FINDING", fit: fitWrap, min: 10})
	tb.add("12", "one two three four five six seven")
	got := tb.lines(20, true)
	want := []string{"STEP  FINDING", "12    one two three", "      four five six", "      seven"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wrapped (-want +got):\n%s", diff)
	}
	if got := wrap("abcdefghij", 4); !cmp.Equal(got, []string{"abcd", "efgh", "ij"}) {
		t.Errorf("wrap of a long word = %q", got)
	}
}
