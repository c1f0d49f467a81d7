package imagecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	stateFile      = "imagecache-state.json"
	stateTmpPrefix = ".imagecache-state-"
	stateVersion   = 1
)

// persisted is the state file's content. It holds the cache specs including
// their credentials, so the file is 0600 in a 0700 directory.
type persisted struct {
	Version int              `json:"version"`
	Caches  []persistedCache `json:"caches"`
	Purges  []persistedPurge `json:"pendingPurges"`
}

type persistedCache struct {
	Namespace       string        `json:"namespace"`
	Name            string        `json:"name"`
	Images          []string      `json:"images"`
	ForceFullCache  bool          `json:"forceFullCache,omitempty"`
	PullSecret      *PullSecret   `json:"pullSecret,omitempty"`
	RefreshInterval time.Duration `json:"refreshIntervalNanos,omitempty"`
	Generation      uint64        `json:"generation"`
	Completed       uint64        `json:"completedGeneration"`
	PendingWorkType WorkType      `json:"pendingWorkType,omitempty"`
}

type persistedPurge struct {
	Image     string   `json:"image"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	WorkType  WorkType `json:"workType"`
}

// readState reads dir's state file. A missing file is an empty state. Stray
// temporary files of an interrupted write are removed.
func readState(dir string) (*persisted, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), stateTmpPrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &persisted{Version: stateVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	var p persisted
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %s is corrupt: %v", ErrState, filepath.Join(dir, stateFile), err)
	}
	if p.Version != stateVersion {
		return nil, fmt.Errorf("%w: %s has unsupported version %d", ErrState, filepath.Join(dir, stateFile), p.Version)
	}
	return &p, nil
}

// writeState replaces dir's state file atomically and durably: a unique
// temporary file in dir, fsync, rename, fsync of dir.
func writeState(dir string, p *persisted) (err error) {
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	tmp, err := os.CreateTemp(dir, stateTmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	if err = os.Rename(tmp.Name(), filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	return nil
}
