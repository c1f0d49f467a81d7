package fsstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
)

// plainFS hides the batchReader of the real file system, so the store takes
// the dirFS path (an lstat, an os.File and a decode per file).
type plainFS struct{ dirFS }

// mixedDir returns a kubelet directory holding good v1beta1 records, a
// v1alpha1 record, non-canonical but valid JSON, undecodable files, a key
// mismatch, an intent in the records directory, non-regular entries and a
// temporary file: every kind of entry load tells apart.
func mixedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	records := recordsPath(dir)
	for i := range 600 { // more than two blocks
		r := testRecord(i)
		writeRaw(t, filepath.Join(records, FileName(r.ImageRef)), mustEncodeRecord(t, r))
	}
	alpha := testRecord(1000)
	writeRaw(t, filepath.Join(records, FileName(alpha.ImageRef)), []byte(strings.Replace(string(mustEncodeRecord(t, alpha)), "v1beta1", "v1alpha1", 1)))
	spaced := testRecord(1001)
	writeRaw(t, filepath.Join(records, FileName(spaced.ImageRef)), []byte(strings.Replace(string(mustEncodeRecord(t, spaced)), `,"imageRef"`, `, "imageRef"`, 1)))
	writeRaw(t, filepath.Join(records, FileName("sha256:torn")), mustEncodeRecord(t, testRecord(1002))[:100])
	writeRaw(t, filepath.Join(records, FileName("sha256:other")), mustEncodeRecord(t, testRecord(1003)))
	writeRaw(t, filepath.Join(records, FileName("sha256:intent")), mustEncodeIntent(t, "sha256:intent"))
	writeRaw(t, filepath.Join(records, "sha256-not-hex"), []byte("{}\n"))
	writeRaw(t, filepath.Join(records, ".sha256-x.123.tmp"), []byte("partial"))
	for i, kind := range nonRegularKinds {
		plantNonRegular(t, kind, filepath.Join(records, FileName(fmt.Sprint("sha256:odd", i))))
	}
	writeRaw(t, filepath.Join(intentsPath(dir), FileName("example.com/a:1")), mustEncodeIntent(t, "example.com/a:1"))
	return dir
}

type listResult struct {
	Records []*accessor.ImagePulledRecord
	Errs    []string
}

func listAll(t *testing.T, s *Store, rangeOver bool) listResult {
	t.Helper()
	var res listResult
	var err error
	if rangeOver {
		var mu sync.Mutex
		err = s.RangeImagePulledRecords(func(r *accessor.ImagePulledRecord) {
			mu.Lock()
			defer mu.Unlock()
			res.Records = append(res.Records, r)
		})
		res.Records = byFileName(res.Records)
	} else {
		res.Records, err = s.ListImagePulledRecords()
	}
	var le *accessor.ListError
	if err != nil && !errors.As(err, &le) {
		t.Fatalf("list: %v", err)
	}
	if le != nil {
		for _, e := range le.Errs {
			res.Errs = append(res.Errs, e.Error())
		}
	}
	return res
}
