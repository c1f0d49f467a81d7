package fsstoretest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

// Fixture describes a kubelet directory's records.
type Fixture struct {
	// Intents are the images with a pull intent.
	Intents []string
	// Records is how many pulled records to write, made by Record(0) to
	// Record(Records-1).
	Records int
	Record  func(i int) *accessor.ImagePulledRecord
	// Edit, when set, may change the encoded bytes of record i before they
	// are written (to plant an old version or a broken file); it must not
	// keep data.
	Edit func(i int, data []byte) []byte
}

// Write replaces dir with a kubelet root directory holding the fixture's
// files, writing the records on one goroutine per core. Much faster than a
// store, whose every write makes a temporary file and renames it.
func (f Fixture) Write(dir string) error {
	if f.Records > 0 && f.Record == nil {
		return errors.New("fsstoretest: Fixture.Records > 0 without Record")
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	pulled := filepath.Join(dir, fsstore.DirName, fsstore.RecordsDir)
	pulling := filepath.Join(dir, fsstore.DirName, fsstore.IntentsDir)
	for _, d := range []string{filepath.Join(dir, fsstore.DirName), pulled, pulling} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		// MkdirAll's mode is masked by the umask; the kubelet's is not.
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	for _, img := range f.Intents {
		data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: img})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(pulling, fsstore.FileName(img)), data, 0o600); err != nil {
			return err
		}
	}
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < f.Records && errs[w] == nil; i += workers {
				errs[w] = f.writeRecord(pulled, i)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f Fixture) writeRecord(pulled string, i int) error {
	r := f.Record(i)
	data, err := accessor.EncodePulledRecord(r)
	if err != nil {
		return err
	}
	if f.Edit != nil {
		data = f.Edit(i, data)
	}
	return os.WriteFile(filepath.Join(pulled, fsstore.FileName(r.ImageRef)), data, 0o600)
}
