package fsstore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// inspectSerially is what Inspect did before it read in parallel through the
// directory's batch: every entry of ReadDir through inspectEntry, one after
// the other.
func inspectSerially(t *testing.T, root *os.Root, d *dir, owner ownerCheck) ([]FileReport, int) {
	t.Helper()
	entries, err := d.fs.ReadDir()
	if err != nil {
		t.Fatal(err)
	}
	var out []FileReport
	n := 0
	for _, e := range entries {
		fr, ok := inspectEntry(d, owner, e.Name(), e.Type())
		if ok {
			n++
		}
		if fr.Problem != "" {
			out = append(out, fr)
		}
	}
	return out, n
}

// Inspect's parallel, batched pass finds exactly what the careful pass over
// each entry finds, across several blocks, with every kind of problem among
// them, on one worker or several.
func TestInspectBatchMatchesCarefulPath(t *testing.T) {
	kubeletDir, _ := problemTree(t)
	records := recordsPath(kubeletDir)
	for i := range 3 * blockSize {
		r := testRecord(100 + i)
		p := filepath.Join(records, FileName(r.ImageRef))
		writeRaw(t, p, mustEncodeRecord(t, r))
		switch i % 97 {
		case 3:
			if err := os.Chmod(p, 0o640); err != nil {
				t.Fatal(err)
			}
		case 5:
			writeRaw(t, p, []byte(strings.Replace(string(mustEncodeRecord(t, r)), "v1beta1", "v1alpha1", 1)))
		case 7:
			writeRaw(t, p, mustEncodeRecord(t, r)[:50])
		case 11:
			if err := os.Truncate(p, maxFileSize+1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, kind := range nonRegularKinds {
		plantNonRegular(t, kind, filepath.Join(records, FileName(fmt.Sprint("sha256:odd", i))))
	}
	root, err := openSafeRoot(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	owner, err := storeOwner(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{IntentsDir, RecordsDir} {
		d, err := openInspectDir(root, kubeletDir, name)
		if err != nil {
			t.Fatal(err)
		}
		defer d.fs.Close()
		if _, ok := d.fs.(batchReader); !ok && runtime.GOOS == "linux" {
			t.Fatal("no batch reader on Linux")
		}
		want, wantN := inspectSerially(t, root, d, owner)
		for _, workers := range []int{1, 2, 5} {
			entries, err := d.listAll()
			if err != nil {
				t.Fatal(err)
			}
			got, n := d.inspectAll(entries, owner, workers)
			if n != wantN {
				t.Errorf("%s, %d workers: %d readable, want %d", name, workers, n, wantN)
			}
			if !slices.IsSortedFunc(got, func(a, b FileReport) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("%s, %d workers: reports not in name order", name, workers)
			}
			if diff := cmp.Diff(sortReports(want), got, cmpopts.IgnoreFields(FileReport{}, "Err")); diff != "" {
				t.Errorf("%s, %d workers (-careful +batch):\n%s", name, workers, diff)
			}
			for i := range min(len(got), len(want)) {
				w, g := sortReports(want)[i], got[i]
				if (w.Err == nil) != (g.Err == nil) || (w.Err != nil && w.Err.Error() != g.Err.Error()) {
					t.Errorf("%s %s: error %v, careful path %v", name, g.Name, g.Err, w.Err)
				}
			}
		}
	}
}
