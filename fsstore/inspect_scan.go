package fsstore

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"
)

// fileStat is what an fstat of a file read in a batch said about it.
type fileStat struct {
	perm fs.FileMode
	uid  uint32
}

// statBatch is a batch that also reports the mode and owner of each file
// it reads (rawBatch on Linux), which spares Inspect an lstat per file.
type statBatch interface {
	batch
	readStat(name string, buf []byte) (data []byte, st fileStat, ok bool)
}

// listAll lists every entry of the directory, sorted by name, with its type
// as the listing gives it (modeUnknown when it gives none).
func (d *dir) listAll() ([]typedEntry, error) {
	var out []typedEntry
	if br, ok := d.fs.(batchReader); ok {
		entries, err := br.readDirTyped()
		if err != nil {
			return nil, err
		}
		out = entries
	} else {
		entries, err := d.fs.ReadDir()
		if err != nil {
			return nil, err
		}
		out = make([]typedEntry, 0, len(entries))
		for _, e := range entries {
			out = append(out, typedEntry{name: e.Name(), typ: e.Type()})
		}
	}
	slices.SortFunc(out, func(a, b typedEntry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// inspectAll examines entries (sorted by name) on up to workers goroutines,
// each taking blocks of consecutive entries, and returns the reports with a
// problem, in entry order, and how many files read back under their own key.
// A regular file under a record name is read through the directory's batch
// when it has one (openat, fstat, read, close: the fstat gives the mode and
// owner); every other entry, and any file the batch cannot read, takes the
// careful path (inspectEntry).
func (d *dir) inspectAll(entries []typedEntry, owner ownerCheck, workers int) ([]FileReport, int) {
	var b statBatch
	if opened := d.openBatch(); opened != nil {
		defer opened.close()
		b, _ = opened.(statBatch)
	}
	found := make([][]FileReport, (len(entries)+blockSize-1)/blockSize)
	var readable atomic.Int64
	eachBlock(len(entries), workers, func(lo, hi int, buf []byte) []byte {
		n := 0
		for _, e := range entries[lo:hi] {
			var fr FileReport
			var ok bool
			fr, ok, buf = d.inspectListed(b, owner, e, buf)
			if ok {
				n++
			}
			if fr.Problem != "" {
				found[lo/blockSize] = append(found[lo/blockSize], fr)
			}
		}
		readable.Add(int64(n))
		return buf
	})
	var out []FileReport
	for _, f := range found {
		out = append(out, f...)
	}
	return out, int(readable.Load())
}

// inspectListed examines one listed entry and returns buf for the next call.
func (d *dir) inspectListed(b statBatch, owner ownerCheck, e typedEntry, buf []byte) (FileReport, bool, []byte) {
	if b != nil && e.typ == 0 && isRecordName(e.name) {
		data, st, read := b.readStat(e.name, buf)
		buf = data[:0]
		if read {
			fr, ok, done := inspectContent(d, FileReport{Dir: d.name, Name: e.name}, data)
			if !done {
				fr = modeProblem(fr, owner.checkUID(st.uid), st.perm)
			}
			return fr, ok, buf
		}
	}
	typ := e.typ
	if typ == modeUnknown {
		info, err := d.fs.Lstat(e.name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return FileReport{}, false, buf
		case err != nil:
			typ = 0 // the read below reports the error
		default:
			typ = info.Mode().Type()
		}
	}
	fr, ok := inspectEntry(d, owner, e.name, typ)
	return fr, ok, buf
}
