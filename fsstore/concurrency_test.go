package fsstore

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestReadersDuringOverwrites overwrites and deletes one key from several
// goroutines while others read it: a reader sees one of the written values
// or nothing, never an error (a rename between a reader's checks is
// retried, not reported as corrupt), and the count stays 0 or 1.
func TestReadersDuringOverwrites(t *testing.T) {
	kubeletDir := t.TempDir()
	s := openStore(t, kubeletDir, WithoutSync())
	logger := testLogger(t)
	values := make([]*accessor.ImagePulledRecord, 4)
	for i := range values {
		values[i] = testRecord(42)
		values[i].CredentialMapping = map[string]accessor.ImagePullCredentials{
			fmt.Sprintf("registry.example.com/v%d", i): {NodePodsAccessible: true},
		}
	}
	ref := values[0].ImageRef
	const iterations = 300
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for w := range 3 {
		wg.Go(func() {
			for i := range iterations {
				var err error
				if (i+w)%7 == 0 {
					err = s.DeleteImagePulledRecord(logger, ref)
				} else {
					err = s.WriteImagePulledRecord(logger, values[(i+w)%len(values)])
				}
				if err != nil {
					report(fmt.Errorf("writer %d: %w", w, err))
				}
			}
		})
	}
	for r := range 3 {
		wg.Go(func() {
			for range iterations {
				got, found, err := s.GetImagePulledRecord(ref)
				if err != nil {
					report(fmt.Errorf("reader %d: %w", r, err))
					continue
				}
				if !found {
					continue
				}
				ok := false
				for _, v := range values {
					ok = ok || cmp.Diff(v, got) == ""
				}
				if !ok {
					report(fmt.Errorf("reader %d: got a value nobody wrote: %+v", r, got))
				}
				if n := s.CountImagePulledRecords(); n > 1 {
					report(fmt.Errorf("count %d", n))
				}
			}
		})
	}
	wg.Go(func() {
		for range iterations / 10 {
			if _, err := s.ListImagePulledRecords(); err != nil {
				report(fmt.Errorf("list: %w", err))
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if tmps := tempFiles(t, kubeletDir); len(tmps) != 0 {
		t.Errorf("temp files left: %v", tmps)
	}
}
