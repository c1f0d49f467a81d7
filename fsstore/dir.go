package fsstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/atomicfile"
)

// dir is one of the store's two directories.
type dir struct {
	name string // IntentsDir or RecordsDir
	path string // full path, for messages
	kind string // the kind of record the directory holds
	what string // how a ListError names the records
	fs   dirFS
	// canonPrefix is how every canonical v1beta1 file of the directory's
	// kind starts.
	canonPrefix []byte

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
	// raw, when not nil, holds the file's bytes after dir.canonPrefix,
	// validated but not yet decoded: dec has only its kind and version
	// (see load).
	raw []byte
	err error
}

func newDir(name, path, kind, what string, fsys dirFS) *dir {
	return &dir{
		name: name, path: path, kind: kind, what: what, fs: fsys, present: map[string]struct{}{},
		canonPrefix: []byte(`{"kind":"` + kind + `","apiVersion":"` + accessor.APIGroup + "/" + accessor.VersionV1beta1 + `",`),
	}
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

// typedEntry is a directory entry with the type the directory reports:
// fs.ModeType bits (0 for a regular file), or modeUnknown.
type typedEntry struct {
	name string
	typ  fs.FileMode
}

const modeUnknown = ^fs.FileMode(0)

// batchReader is implemented by the real file system where it can list a
// directory and read many of its files with fewer system calls than the
// dirFS methods (rootDir on Linux). Wrapped file systems (tests) do not
// implement it and take the dirFS path.
type batchReader interface {
	// readDirTyped lists the directory with each entry's type as the
	// directory reports it, stating nothing.
	readDirTyped() ([]typedEntry, error)
	// openBatch opens the directory for reading many of its files.
	openBatch() (batch, error)
}

// batch reads files of one directory; read is safe for concurrent use.
type batch interface {
	// read returns the content of a regular file of at most maxFileSize
	// bytes, in buf if it is large enough. ok is false when the file is
	// anything else or could not be read: the caller then takes the
	// careful path (readFile), which decides what the entry is.
	read(name string, buf []byte) (data []byte, ok bool)
	close() error
}

// openBatch opens a batch over the directory, or returns nil when its file
// system has none (or it cannot be opened): the readers then take the dirFS
// path. The caller closes a batch it got.
func (d *dir) openBatch() batch {
	if br, ok := d.fs.(batchReader); ok {
		if b, err := br.openBatch(); err == nil {
			return b
		}
	}
	return nil
}

// scan lists the names of the directory's record entries and of its stray
// temporary files. A record entry is any entry whose name the kubelet would
// read ("sha256-…" not ending in ".tmp"), whatever its type: a
// sub-directory, FIFO, socket, device or symbolic link under such a name is
// listed too, and reads report it as corrupt (ErrNotRegular), so that no
// list, and no cache built from one, can take its key for absent. A
// sub-directory is never a temporary file to remove. Each record entry comes
// with the type the directory listing gave (modeUnknown when it gave none).
func (d *dir) scan() (names []typedEntry, temps []string, err error) {
	if br, ok := d.fs.(batchReader); ok {
		entries, err := br.readDirTyped()
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			switch {
			case strings.HasSuffix(e.name, tempSuffix):
				typ := e.typ
				if typ == modeUnknown {
					info, err := d.fs.Lstat(e.name)
					if err != nil {
						continue // gone, or not ours to judge: not swept
					}
					typ = info.Mode().Type()
				}
				if typ&fs.ModeDir == 0 {
					temps = append(temps, e.name)
				}
			case strings.HasPrefix(e.name, namePrefix):
				names = append(names, e)
			}
		}
	} else {
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
				// The type is not used: the dirFS path lstats
				// every file it reads.
				names = append(names, typedEntry{name: name, typ: modeUnknown})
			}
		}
	}
	slices.SortFunc(names, func(a, b typedEntry) int { return strings.Compare(a.name, b.name) })
	return names, temps, nil
}

// blockSize is how many consecutive entries a worker takes at a time.
const blockSize = 256

// load reads and decodes names with a small pool of workers. Files that
// disappeared since they were listed are left out. With deferDecode, a
// record file in the canonical v1beta1 form (every file the kubelet wrote)
// is only validated (accessor.ValidateCanonical) and its bytes kept in
// loaded.raw, to be decoded by each (the open-time snapshot: the bytes take
// some 60 % of the memory of a decoded record, hold no pointers, and are
// released one by one as the first list decodes them); every other file is
// decoded now.
func (d *dir) load(names []typedEntry, workers int, deferDecode bool) []loaded {
	out := make([]loaded, len(names))
	b := d.openBatch()
	if b != nil {
		defer b.close()
	}
	eachBlock(len(names), workers, func(lo, hi int, buf []byte) []byte {
		for i := lo; i < hi; i++ {
			out[i], buf = d.readEntry(b, names[i], buf, deferDecode)
		}
		return buf
	})
	return slices.DeleteFunc(out, func(l loaded) bool { return l.name == "" })
}

// readEntry reads and decodes one listed entry as load does, through b (when
// not nil) if the listing says it is a regular file, and returns buf for the
// next call. A file that disappeared gives a loaded with no name.
func (d *dir) readEntry(b batch, e typedEntry, buf []byte, deferDecode bool) (loaded, []byte) {
	var data []byte
	ok := false
	if b != nil && e.typ == 0 {
		data, ok = b.read(e.name, buf)
		buf = data[:0]
	}
	if !ok {
		return d.loadOne(e.name), buf
	}
	if deferDecode {
		if version, ok := d.validate(e.name, data); ok {
			return loaded{
				name: e.name,
				dec:  accessor.Decoded{Kind: d.kind, Version: version},
				// Kept without the prefix every such file starts
				// with; each puts it back.
				raw: bytes.Clone(data[len(d.canonPrefix):]),
			}, buf
		}
	}
	dec, err := d.decode(e.name, data)
	return loaded{name: e.name, dec: dec, err: err}, buf
}

// validate reports whether data is a canonical v1beta1 file of the
// directory's kind whose key is name's: one that decodes without error.
func (d *dir) validate(name string, data []byte) (version string, ok bool) {
	f, ok := d.canonical(name, data)
	return f.Version, ok
}

// canonical is validate, returning what accessor.ValidateCanonical found.
func (d *dir) canonical(name string, data []byte) (accessor.CanonicalFile, bool) {
	f, ok := accessor.ValidateCanonical(data)
	if !ok || f.Kind != d.kind || f.Version != accessor.VersionV1beta1 || FileName(f.Key) != name ||
		!bytes.HasPrefix(data, d.canonPrefix) {
		return accessor.CanonicalFile{}, false
	}
	return f, true
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
	return d.load(names, workers, false), nil
}

// each calls fn for every entry, on up to workers goroutines, each taking
// blocks of consecutive entries, with the entry decoded (an entry whose
// decoding was deferred is decoded first). After fn returns, the entry no
// longer holds its raw bytes or decoded value, so a consumed open-time
// snapshot is released block by block while later blocks are decoded.
func (d *dir) each(entries []loaded, workers int, fn func(i int, l *loaded)) {
	eachBlock(len(entries), workers, func(lo, hi int, buf []byte) []byte {
		for i := lo; i < hi; i++ {
			l := &entries[i]
			if l.raw != nil {
				buf = append(append(buf[:0], d.canonPrefix...), l.raw...)
				l.dec, l.err = d.decodeValidated(l.name, buf)
			}
			fn(i, l)
			*l = loaded{name: l.name, err: l.err}
		}
		return buf
	})
}

// decodeValidated decodes bytes validate accepted.
func (d *dir) decodeValidated(name string, data []byte) (accessor.Decoded, error) {
	dec, err := accessor.Decode(data)
	if err != nil || dec.Kind != d.kind {
		// Not expected: validate checked what Decode checks. Take the
		// general path, which words the error.
		return d.decode(name, data)
	}
	if dec.Record != nil {
		dec.Record.LastUpdatedTime = accessor.StorageTime(dec.Record.LastUpdatedTime.Time)
	}
	return dec, nil
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
