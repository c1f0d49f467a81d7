package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
)

// checkKubeletDir turns the common ways a kubelet directory can be unusable
// into one clear error.
func checkKubeletDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("kubelet directory %s does not exist (set --kubelet-dir)", dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("kubelet directory %s: permission denied (run as root?)", dir)
	case err != nil:
		return fmt.Errorf("kubelet directory %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("kubelet directory %s is not a directory", dir)
	}
	return nil
}

// hasStore reports whether <kubeletDir>/image_manager exists. A kubelet that
// never pulled with the feature on has no such directory: read-only commands
// then see an empty store instead of failing.
func hasStore(kubeletDir string) (bool, error) {
	p := filepath.Join(kubeletDir, fsstore.DirName)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, fs.ErrPermission):
		return false, fmt.Errorf("%s: permission denied (run as root?)", p)
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, fmt.Errorf("%s: %w", p, fsstore.ErrUnsafeDir)
	}
	return true, nil
}

// readStore is a read-only view of the records.
type readStore interface {
	accessor.PullRecordsAccessor
	Close() error
}

type emptyStore struct{ *memstore.Store }

func (emptyStore) Close() error { return nil }

// openReadOnly opens the store under --kubelet-dir without writing anything.
func (g *globalOptions) openReadOnly() (readStore, error) { return g.openRead() }

// openUnscanned is openReadOnly without the read of every file at open
// (fsstore.WithoutScan): opening costs the same whatever the number of
// records, a point read (get) reads the one file its key names, and a walk
// (ls) reads the directory as it goes.
func (g *globalOptions) openUnscanned() (readStore, error) {
	return g.openRead(fsstore.WithoutScan())
}

func (g *globalOptions) openRead(opts ...fsstore.Option) (readStore, error) {
	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return nil, err
	}
	ok, err := hasStore(g.kubeletDir)
	if err != nil {
		return nil, err
	}
	if !ok {
		fmt.Fprintf(g.stderr, "pullrecords: note: %s has no %s directory: no records\n", g.kubeletDir, fsstore.DirName)
		return emptyStore{memstore.New()}, nil
	}
	s, err := fsstore.New(g.logger(), g.kubeletDir, append([]fsstore.Option{fsstore.WithReadOnly()}, opts...)...)
	if err != nil {
		return nil, describeFSError(err)
	}
	return s, nil
}

// openWritable opens the store under --kubelet-dir for writing, for the
// command what, taking the records' lock: if another process holds it, the
// error is what's refusal naming the holder. Opening migrates v1alpha1 files
// and removes stray temporary files. Call guardWrite first.
func (g *globalOptions) openWritable(what string) (*fsstore.Store, error) {
	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return nil, err
	}
	s, err := fsstore.New(g.logger(), g.kubeletDir)
	if err != nil {
		return nil, lockRefusal(what, describeFSError(err))
	}
	return s, nil
}

// describeFSError adds a hint to errors an operator can act on. The store's
// errors name the path already.
func describeFSError(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (run as root?)", err)
	}
	return err
}
