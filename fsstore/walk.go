package fsstore

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pullrecords/pullrecords/accessor"
)

// WalkOrder is the order in which a walk hands out a directory's entries.
type WalkOrder int

const (
	// ByFileName hands out entries in file-name order (the order of the
	// lists), each file read once, as soon as it is read.
	ByFileName WalkOrder = iota
	// ByKey hands out readable entries sorted by key (the imageRef of a
	// record, the image of an intent; entries with equal keys by file name),
	// then the entries that could not be read, in file-name order. It reads
	// every file twice: first only to learn its key (a file in the form the
	// kubelet writes is checked, not decoded), keeping the keys and names
	// (some 200 bytes per file, never a decoded record), then again to hand
	// it out. An entry replaced between the two reads is handed out as the
	// second read finds it, in the place of its first key.
	ByKey
)

// WalkImagePulledRecords calls fn once for every record entry of the records
// directory, in the given order, on the caller's goroutine: with the record
// and a nil error for a readable record, and with a nil record and the error
// a list would name in its *accessor.ListError for any other entry (a
// *accessor.CorruptRecordError for an undecodable, oversized, non-regular,
// mismatched or wrong-kind entry). A non-nil error from fn stops the walk and
// is returned; an error listing the directory is returned before fn is
// called. fn must not close the store.
//
// The walk reads the disk on every call, in the background, with one worker
// per core, and never holds more than a few blocks of 256 decoded records
// however many files there are: fn sees the first records while later files
// are still being read (with ByKey, once every key is known). It neither
// uses nor consumes the open-time snapshot.
func (s *Store) WalkImagePulledRecords(order WalkOrder, fn func(*accessor.ImagePulledRecord, error) error) error {
	return walkOf(s, s.records, order, fn, recordOf)
}

// WalkImagePullIntents is WalkImagePulledRecords for the intents directory.
func (s *Store) WalkImagePullIntents(order WalkOrder, fn func(*accessor.ImagePullIntent, error) error) error {
	return walkOf(s, s.intents, order, fn, intentOf)
}

// walkOf is both walks: it walks d, handing fn what pick takes from each
// readable entry, or the entry's error.
func walkOf[T any](s *Store, d *dir, order WalkOrder, fn func(*T, error) error, pick func(*accessor.Decoded) *T) error {
	end, err := s.begin(false)
	if err != nil {
		return err
	}
	defer end()
	return d.walk(order, s.opts.workers, func(l *loaded) error {
		if l.err != nil {
			return fn(nil, l.err)
		}
		return fn(pick(&l.dec), nil)
	})
}

// walk lists d and calls fn with each record entry in the given order.
func (d *dir) walk(order WalkOrder, workers int, fn func(l *loaded) error) error {
	names, _, err := d.scan()
	if err != nil {
		return fmt.Errorf("listing %s: %w", d.path, err)
	}
	if order == ByKey {
		names = d.sortByKey(names, workers)
	}
	return d.walkEntries(names, workers, fn)
}

// keyed is a listed entry with the key its content names ("" when it could
// not be read).
type keyed struct {
	typedEntry
	key string
	ok  bool
}

// sortByKey reads every entry of names (sorted by name) to learn its key and
// returns the entries sorted by key, then the unreadable ones in name order.
// Entries that disappeared are left out.
func (d *dir) sortByKey(names []typedEntry, workers int) []typedEntry {
	keys := make([]keyed, len(names))
	b := d.openBatch()
	if b != nil {
		defer b.close()
	}
	eachBlock(len(names), workers, func(lo, hi int, buf []byte) []byte {
		for i := lo; i < hi; i++ {
			keys[i], buf = d.readKey(b, names[i], buf)
		}
		return buf
	})
	keys = slices.DeleteFunc(keys, func(k keyed) bool { return k.name == "" })
	slices.SortFunc(keys, func(a, b keyed) int {
		switch {
		case a.ok != b.ok:
			if a.ok {
				return -1
			}
			return 1
		case a.ok && a.key != b.key:
			return strings.Compare(a.key, b.key)
		}
		return strings.Compare(a.name, b.name)
	})
	out := names[:0]
	for _, k := range keys {
		out = append(out, k.typedEntry)
	}
	return out
}

// readKey reads one listed entry for its key, through b (when not nil) if
// the listing says it is a regular file, and returns buf for the next call.
func (d *dir) readKey(b batch, e typedEntry, buf []byte) (keyed, []byte) {
	if b != nil && e.typ == 0 {
		data, ok := b.read(e.name, buf)
		buf = data[:0]
		if ok {
			if f, ok := d.canonical(e.name, data); ok {
				return keyed{typedEntry: e, key: f.Key, ok: true}, buf
			}
			dec, err := d.decode(e.name, data)
			return keyed{typedEntry: e, key: dec.Key(), ok: err == nil}, buf
		}
	}
	l := d.loadOne(e.name)
	if l.name == "" {
		return keyed{}, buf
	}
	return keyed{typedEntry: e, key: l.dec.Key(), ok: l.err == nil}, buf
}

// eachBlock is the package's one pool of readers: it calls fn with the
// bounds of each block of blockSize of n entries, on up to workers
// goroutines, each taking the next block not yet taken, and returns when
// all are done. fn gets its goroutine's buffer and returns it, so a
// goroutine reuses one buffer for every file it reads.
func eachBlock(n, workers int, fn func(lo, hi int, buf []byte) []byte) {
	blocks := (n + blockSize - 1) / blockSize
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, blocks)) {
		wg.Go(func() {
			var buf []byte
			for {
				k := int(next.Add(1)) - 1
				if k >= blocks {
					return
				}
				buf = fn(k*blockSize, min((k+1)*blockSize, n), buf)
			}
		})
	}
	wg.Wait()
}

// walkWindow is how many blocks per worker a walk reads ahead of fn.
const walkWindow = 2

// walkEntries reads and decodes names in blocks of blockSize on up to
// workers goroutines and calls fn with each entry in the order of names, on
// the calling goroutine, as soon as its block is read. At most walkWindow
// blocks per worker are read ahead of fn.
func (d *dir) walkEntries(names []typedEntry, workers int, fn func(l *loaded) error) error {
	if len(names) == 0 {
		return nil
	}
	b := d.openBatch()
	if b != nil {
		defer b.close()
	}
	type job struct {
		entries []typedEntry
		out     chan []loaded
	}
	blocks := (len(names) + blockSize - 1) / blockSize
	workers = max(1, min(workers, blocks))
	window := walkWindow * workers
	// Buffered for the whole window: handing out a block never waits for
	// a worker, so fn is called as soon as the next block is ready.
	jobs := make(chan job, window)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf []byte
			for j := range jobs {
				out := make([]loaded, 0, len(j.entries))
				for _, e := range j.entries {
					var l loaded
					l, buf = d.readEntry(b, e, buf, false)
					if l.name != "" {
						out = append(out, l)
					}
				}
				j.out <- out
			}
		})
	}
	pending := make([]chan []loaded, 0, window)
	var ferr error
	consume := func() {
		out := <-pending[0]
		pending = pending[1:]
		for i := range out {
			if ferr != nil {
				return
			}
			ferr = fn(&out[i])
		}
	}
	for k := 0; k < blocks && ferr == nil; k++ {
		if len(pending) == window {
			consume()
			if ferr != nil {
				break
			}
		}
		ch := make(chan []loaded, 1)
		jobs <- job{entries: names[k*blockSize : min((k+1)*blockSize, len(names))], out: ch}
		pending = append(pending, ch)
	}
	close(jobs)
	for len(pending) > 0 {
		consume()
	}
	wg.Wait()
	return ferr
}
