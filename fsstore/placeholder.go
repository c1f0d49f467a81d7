package fsstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// placeholderContent is what Repair leaves under the name of an entry a check
// reads as an error (corrupt, oversized, of the wrong kind, or not a regular
// file). It is deliberately not JSON, so every decoder, this store's and the
// kubelet's strict one, reads it as corrupt: a check for the key the name
// stands for keeps answering "must pull" under every policy (step 4), as it
// did for the entry it replaced. A write of that key (the kubelet's next pull
// of the image) replaces it like any other file.
var placeholderContent = []byte("pullrecords fail-safe placeholder: the entry that was here could not be read " +
	"and was moved to image_manager/quarantine; every check for it answers \"must pull\" until the kubelet " +
	"next pulls the image and rewrites this file\n")

// isPlaceholder says whether data is the placeholder Repair writes.
func isPlaceholder(data []byte) bool { return bytes.Equal(data, placeholderContent) }

// holdPrefix starts the name under which Repair holds an entry between
// swapping the placeholder in and moving the entry to quarantine. It is not a
// record name (no "sha256-" prefix), so no read path ever looks at it, and a
// crash in between leaves a foreign file the next repair quarantines.
const holdPrefix = ".pullrecords-repair-"

// errCannotSwap is returned by swapInPlaceholder when the entry cannot be
// replaced without a moment in which its name is absent (a directory, where
// the file system cannot exchange two names atomically).
var errCannotSwap = errors.New("the file system cannot replace this entry atomically; it is kept as it is")

// exchangeNames is exchange; tests replace it to take the fallback path.
var exchangeNames = exchange

// errExchangeUnsupported is returned by exchange where renameat2's
// RENAME_EXCHANGE is not available.
var errExchangeUnsupported = errors.New("atomic exchange of two names is not supported here")

// swapInPlaceholder replaces the entry name of image_manager/<dirName> by the
// placeholder without the name ever being absent, and moves the entry to
// quarantine. It returns the entry's new path relative to root. Steps, each
// safe to crash after:
//
//  1. the placeholder is written and fsynced under a hold name;
//  2. the hold name and name are exchanged atomically (renameat2
//     RENAME_EXCHANGE), or, where that is not supported and the entry is not
//     a directory, the entry is hard-linked under a second hold name and the
//     placeholder renamed over it;
//  3. the directory is fsynced, so name holds the placeholder for good;
//  4. the held entry is moved into the quarantine made before step 1.
func swapInPlaceholder(root *os.Root, dirName, name string) (string, error) {
	// The quarantine must be usable before anything changes, so a repair
	// that cannot quarantine leaves the entry as it was.
	qdir, err := ensureQuarantine(root, dirName)
	if err != nil {
		return "", err
	}
	rel := DirName + "/" + dirName
	dirFile, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer dirFile.Close()
	hold, err := freeHoldName(root, rel, name)
	if err != nil {
		return "", err
	}
	if err := writeSynced(root, rel+"/"+hold, placeholderContent); err != nil {
		return "", err
	}
	held := hold
	err = exchangeNames(dirFile, hold, name)
	if errors.Is(err, errExchangeUnsupported) {
		held, err = linkThenReplace(root, rel, dirFile, hold, name)
	}
	if err != nil {
		_ = root.Remove(rel + "/" + hold)
		return "", err
	}
	if err := dirFile.Sync(); err != nil {
		return "", err
	}
	return moveToQuarantine(root, qdir, dirName, held, name)
}

// linkThenReplace is step 2 without renameat2: the entry keeps a second name
// (a hard link, which works for every type but a directory), then the
// placeholder is renamed over name. It returns the name holding the entry.
func linkThenReplace(root *os.Root, rel string, dirFile *os.File, placeholder, name string) (string, error) {
	info, err := root.Lstat(rel + "/" + name)
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		return "", errCannotSwap
	}
	held, err := freeHoldName(root, rel, name+".entry")
	if err != nil {
		return "", err
	}
	if err := link(dirFile, name, held); err != nil {
		return "", err
	}
	if err := root.Rename(rel+"/"+placeholder, rel+"/"+name); err != nil {
		_ = root.Remove(rel + "/" + held)
		return "", err
	}
	return held, nil
}

// freeHoldName returns a hold name for name that no entry of rel uses.
func freeHoldName(root *os.Root, rel, name string) (string, error) {
	for i := 0; i < 1000; i++ {
		hold := holdPrefix + name
		if i > 0 {
			hold += "." + strconv.Itoa(i)
		}
		if _, err := root.Lstat(rel + "/" + hold); errors.Is(err, fs.ErrNotExist) {
			return hold, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("too many held copies of %s", name)
}

// writeSynced creates p (which must not exist) with data, mode 0600, and
// fsyncs it.
func writeSynced(root *os.Root, p string, data []byte) error {
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(filePerm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
