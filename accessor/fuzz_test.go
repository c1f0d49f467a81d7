package accessor_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pullrecords/pullrecords/accessor"
)

// addTestdataSeeds adds every file under ../testdata and torn prefixes of
// each to the corpus.
func addTestdataSeeds(f *testing.F) {
	n := 0
	err := filepath.WalkDir("../testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) == ".md" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.Add(data)
		for _, cut := range []int{1, 2, len(data) / 4, len(data) / 2, len(data) - 2, len(data) - 1} {
			if cut > 0 && cut < len(data) {
				f.Add(data[:cut])
			}
		}
		n++
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	if n < 10 {
		f.Fatalf("only %d seed files under ../testdata", n)
	}
}

// encodeDecoded encodes what Decode returned.
func encodeDecoded(d accessor.Decoded) ([]byte, error) {
	if d.Intent != nil {
		return accessor.EncodeIntent(d.Intent)
	}
	return accessor.EncodePulledRecord(d.Record)
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// survives Encode: the encoded bytes decode again to the same value (up to
// what the format cannot hold: sub-second times and empty versus absent
// lists and maps) and re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	addTestdataSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		d1, err := accessor.Decode(data)
		if err != nil {
			return
		}
		if (d1.Intent == nil) == (d1.Record == nil) {
			t.Fatalf("Decode returned %+v: want exactly one of intent and record", d1)
		}
		enc1, err := encodeDecoded(d1)
		if err != nil {
			t.Fatalf("Encode of a decoded value failed: %v", err)
		}
		d2, err := accessor.Decode(enc1)
		if err != nil {
			t.Fatalf("encoded bytes %q do not decode: %v", enc1, err)
		}
		if d2.Version != accessor.CurrentVersion || d2.Kind != d1.Kind {
			t.Errorf("re-decoded %s/%s, want %s/%s", d2.Kind, d2.Version, d1.Kind, accessor.CurrentVersion)
		}
		want := d1
		if d1.Record != nil {
			want.Record = d1.Record.ForStorage()
		}
		if diff := cmp.Diff(want.Intent, d2.Intent); diff != "" {
			t.Errorf("intent changed (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff(want.Record, d2.Record, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("record changed (-first +second):\n%s", diff)
		}
		enc2, err := encodeDecoded(d2)
		if err != nil {
			t.Fatal(err)
		}
		if string(enc1) != string(enc2) {
			t.Errorf("encoding is not byte-stable:\n%q\n%q", enc1, enc2)
		}
	})
}
