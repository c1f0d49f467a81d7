package fsstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/internal/atomicfile"
)

// dir is one of the store's two directories.
type dir struct {
	name string // IntentsDir or RecordsDir
	path string // full path, for messages
	kind string // the kind of record the directory holds
	what string // how a ListError names the records
	fs   dirFS

	mu sync.Mutex
	// present holds the names of the record files in the directory, readable
	// or not, maintained by writes and deletes.
	present map[string]struct{}
	// snapshot is what open decoded, handed to the first list unless a write
	// or delete came first. nil when used up or invalidated.
	snapshot []loaded
}

// loaded is one record file read from a directory.
type loaded struct {
	name string
	dec  accessor.Decoded // valid when err is nil, or when err is a key mismatch
	err  error
}

func newDir(name, path, kind, what string, fsys dirFS) *dir {
	return &dir{name: name, path: path, kind: kind, what: what, fs: fsys, present: map[string]struct{}{}}
}

func (d *dir) corrupt(name string, err error) error {
	return &accessor.CorruptRecordError{Path: filepath.Join(d.path, name), Err: err}
}

// isRecordName says whether the kubelet would read a file of this name.
func isRecordName(name string) bool {
	return strings.HasPrefix(name, namePrefix) && !strings.HasSuffix(name, tempSuffix)
}

// readFile returns the content of name, never reading through a symbolic
// link and never reading more than maxFileSize bytes. A missing file gives an
// error matching fs.ErrNotExist; a non-regular or oversized one a
// *accessor.CorruptRecordError.
func (d *dir) readFile(name string) ([]byte, error) {
	// The entry is checked with Lstat before it is opened (so a device or a
	// FIFO is never opened for reading) and the opened file is compared with
	// it (so a link swapped in between is never read). A regular file
	// replaced by a concurrent rename between the two steps is retried.
	for attempt := 0; ; attempt++ {
		info, err := d.fs.Lstat(name)
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			return nil, d.corrupt(name, fmt.Errorf("%w: %v", ErrNotRegular, info.Mode().Type()))
		}
		if info.Size() > maxFileSize {
			return nil, d.corrupt(name, accessor.ErrTooLarge)
		}
		f, err := d.fs.OpenRead(name)
		if err != nil {
			return nil, err
		}
		data, same, err := readOpened(f, info)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if errors.Is(err, accessor.ErrTooLarge) {
			return nil, d.corrupt(name, err)
		}
		if err != nil {
			return nil, err
		}
		if same {
			return data, nil
		}
		if attempt == 7 {
			return nil, d.corrupt(name, fmt.Errorf("%w: the entry changed while it was opened", ErrNotRegular))
		}
	}
}

// readOpened reads f if it is the regular file info describes.
func readOpened(f fsFile, info fs.FileInfo) (data []byte, same bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(info, fi) {
		return nil, false, nil
	}
	if fi.Size() > maxFileSize {
		return nil, false, accessor.ErrTooLarge
	}
	buf := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == nil && int64(len(buf)) == fi.Size() && n > 0 {
			// Files are replaced by rename, never appended to, so the size
			// fstat gave is the whole file: skip the read that would
			// only confirm the end.
			return buf, true, nil
		}
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if len(buf) > maxFileSize {
			return nil, false, accessor.ErrTooLarge
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
	}
}

// decode decodes the content of name and checks its kind and key.
func (d *dir) decode(name string, data []byte) (accessor.Decoded, error) {
	dec, err := accessor.Decode(data)
	if err != nil {
		return accessor.Decoded{}, d.corrupt(name, err)
	}
	if dec.Kind != d.kind {
		return accessor.Decoded{}, d.corrupt(name, fmt.Errorf("%w: %s in %s/", ErrWrongKind, dec.Kind, d.name))
	}
	if dec.Record != nil {
		dec.Record.LastUpdatedTime = accessor.StorageTime(dec.Record.LastUpdatedTime.Time)
	}
	if FileName(dec.Key()) != name {
		return dec, d.corrupt(name, ErrKeyMismatch)
	}
	return dec, nil
}

// get reads and decodes name. found is false for a missing file and for a
// file whose content names another key.
func (d *dir) get(name string) (dec accessor.Decoded, found bool, err error) {
	data, err := d.readFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return dec, false, nil
	}
	if err != nil {
		return dec, false, err
	}
	dec, err = d.decode(name, data)
	if errors.Is(err, ErrKeyMismatch) {
		return dec, false, nil
	}
	if err != nil {
		return dec, false, err
	}
	return dec, true, nil
}

// scan lists the names of the directory's record entries and of its stray
// temporary files. A record entry is any entry whose name the kubelet would
// read ("sha256-…" not ending in ".tmp"), whatever its type: a
// sub-directory, FIFO, socket, device or symbolic link under such a name is
// listed too, and reads report it as corrupt (ErrNotRegular), so that no
// list, and no cache built from one, can take its key for absent. A
// sub-directory is never a temporary file to remove.
func (d *dir) scan() (names, temps []string, err error) {
	entries, err := d.fs.ReadDir()
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tempSuffix):
			if !e.IsDir() {
				temps = append(temps, name)
			}
		case strings.HasPrefix(name, namePrefix):
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, temps, nil
}

// load reads and decodes names with a small pool of workers. Files that
// disappeared since they were listed are left out.
func (d *dir) load(names []string, workers int) []loaded {
	out := make([]loaded, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, len(names))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				out[i] = d.loadOne(names[i])
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(out, func(l loaded) bool { return l.name == "" })
}

func (d *dir) loadOne(name string) loaded {
	data, err := d.readFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return loaded{}
	}
	if err != nil {
		var corrupt *accessor.CorruptRecordError
		if !errors.As(err, &corrupt) {
			err = fmt.Errorf("reading %s: %w", filepath.Join(d.path, name), err)
		}
		return loaded{name: name, err: err}
	}
	dec, err := d.decode(name, data)
	return loaded{name: name, dec: dec, err: err}
}

// list returns the open-time snapshot the first time it is called, unless a
// write or delete happened since, and reads the directory otherwise.
func (d *dir) list(workers int) ([]loaded, error) {
	d.mu.Lock()
	snap := d.snapshot
	d.snapshot = nil
	d.mu.Unlock()
	if snap != nil {
		return snap, nil
	}
	names, _, err := d.scan()
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", d.path, err)
	}
	return d.load(names, workers), nil
}

func (d *dir) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.present)
}

func (d *dir) setPresent(name string, present bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if present {
		d.present[name] = struct{}{}
	} else {
		delete(d.present, name)
	}
}

func (d *dir) isPresent(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.present[name]
	return ok
}

func (d *dir) invalidate() {
	d.mu.Lock()
	d.snapshot = nil
	d.mu.Unlock()
}

// put writes data to name with atomicfile.Replace: a unique temporary file
// in the same directory (".<name>.<random>.tmp", a name the kubelet ignores
// twice over) is written, synced and closed, then renamed onto name, and the
// directory is synced. On failure the temporary file is removed (best
// effort); name then holds its old content or, if the rename happened (the
// error then matches accessor.ErrNotDurable), the new one.
func (d *dir) put(name string, data []byte, sync bool) error {
	if len(data) > maxFileSize {
		// Every read would refuse it as corrupt: refuse it now, before
		// the disk is touched, rather than acknowledge an unreadable write.
		return fmt.Errorf("%w: encoding is %d bytes, the limit is %d", accessor.ErrTooLarge, len(data), maxFileSize)
	}
	d.invalidate()
	err := atomicfile.Replace(atomicDir{d.fs}, name, data, atomicfile.Options{Perm: filePerm, NoSync: !sync})
	if err == nil || errors.Is(err, atomicfile.ErrNotDurable) {
		d.setPresent(name, true)
	}
	if errors.Is(err, atomicfile.ErrNotDurable) {
		return fmt.Errorf("%w: %w", accessor.ErrNotDurable, err)
	}
	return err
}

// remove deletes name; a missing file is not an error.
func (d *dir) remove(name string, sync bool) error {
	d.invalidate()
	if err := d.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	d.setPresent(name, false)
	if sync {
		if err := d.fs.SyncDir(); err != nil {
			return fmt.Errorf("%w: syncing directory: %w", accessor.ErrNotDurable, err)
		}
	}
	return nil
}
