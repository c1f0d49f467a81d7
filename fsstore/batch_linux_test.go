package fsstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// The batch path exists on Linux only (batch_linux.go), so its tests are
// built only there.

// The batch path (getdents types, raw reads, validation at open and decoding
// at the first list) gives exactly what the dirFS path gives, for the
// open-time snapshot and for later lists, through List and through Range.
func TestBatchPathMatchesDirFSPath(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("readOnly=%v", readOnly), func(t *testing.T) {
			var got [2][4]listResult
			for i, plain := range []bool{false, true} {
				for j, rangeOver := range []bool{false, true} {
					dir := mixedDir(t)
					opts := []Option{WithoutSync()}
					if readOnly {
						opts = append(opts, WithReadOnly())
					}
					if plain {
						opts = append(opts, withFS(func(_ string, d dirFS) dirFS { return plainFS{d} }))
					}
					s := openStore(t, dir, opts...)
					if _, ok := s.records.fs.(batchReader); ok == plain {
						t.Fatalf("plain=%v: batchReader implemented = %v", plain, ok)
					}
					got[i][2*j] = listAll(t, s, rangeOver)   // the open-time snapshot
					got[i][2*j+1] = listAll(t, s, rangeOver) // the disk
					if len(got[i][2*j].Records) < 600 || len(got[i][2*j].Errs) < 5 {
						t.Fatalf("plain=%v range=%v: %d records, %d errors", plain, rangeOver, len(got[i][2*j].Records), len(got[i][2*j].Errs))
					}
				}
			}
			for k := range 4 {
				// Paths differ only in the temporary directory name.
				a, b := got[0][k], got[1][k]
				if diff := cmp.Diff(len(a.Errs), len(b.Errs)); diff != "" {
					t.Errorf("list %d: error counts differ: %s\n%v\n%v", k, diff, a.Errs, b.Errs)
				}
				if diff := cmp.Diff(a.Records, b.Records); diff != "" {
					t.Errorf("list %d: records differ (-batch +dirFS):\n%s", k, diff)
				}
				for e := range min(len(a.Errs), len(b.Errs)) {
					if base(a.Errs[e]) != base(b.Errs[e]) {
						t.Errorf("list %d error %d: %q vs %q", k, e, a.Errs[e], b.Errs[e])
					}
				}
			}
		})
	}
}

// base strips the directory from an error message naming a record file.
func base(msg string) string {
	i := strings.Index(msg, "sha256-")
	if i < 0 {
		return msg
	}
	j := strings.LastIndex(msg[:i], " ")
	return msg[:j+1] + msg[i:]
}

// The open-time snapshot keeps undecoded bytes only for canonical v1beta1
// record files; every other entry is decoded (or failed) at open.
func TestOpenDefersOnlyCanonicalRecords(t *testing.T) {
	s := openStore(t, mixedDir(t), WithoutSync(), WithReadOnly())
	s.records.mu.Lock()
	snap := slices.Clone(s.records.snapshot)
	s.records.mu.Unlock()
	deferred := 0
	for _, l := range snap {
		if l.raw == nil {
			continue
		}
		deferred++
		if l.err != nil || l.dec.Record != nil || l.dec.Version != accessor.VersionV1beta1 {
			t.Errorf("%s deferred with %+v", l.name, l)
		}
	}
	if deferred != 600 {
		t.Errorf("%d entries deferred, want the 600 canonical records", deferred)
	}
}
