package imagecache

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"time"
)

// The last completed status of each cache is kept in a file of its own
// beside the state file, not in it: the state file is read with unknown
// fields refused, so a new field there would make an older version refuse
// the whole state. Readers of this file ignore fields they do not know.
const (
	lastStatusFile    = "last-status.json"
	lastStatusVersion = 1
)

// persistedLastStatus is the last-status file's content. It holds no
// credential: a CacheStatus names caches, images and outcomes only (no
// result carries a credential or a credential hash).
type persistedLastStatus struct {
	Version int               `json:"version"`
	Caches  []persistedStatus `json:"caches"`
}

type persistedStatus struct {
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	WorkType  WorkType                `json:"workType"`
	Batch     uint64                  `json:"batch"`
	Started   time.Time               `json:"started"`
	Finished  time.Time               `json:"finished"`
	Duration  time.Duration           `json:"durationNanos"`
	Requests  int                     `json:"requests"`
	Counts    map[ImageWorkStatus]int `json:"counts"`
	Results   []persistedResult       `json:"results,omitempty"`
}

type persistedResult struct {
	Image                   string          `json:"image"`
	Node                    string          `json:"node,omitempty"`
	ContainerRuntimeVersion string          `json:"containerRuntimeVersion,omitempty"`
	WorkType                WorkType        `json:"workType"`
	ForceFullCache          bool            `json:"forceFullCache,omitempty"`
	Status                  ImageWorkStatus `json:"status"`
	Reason                  string          `json:"reason,omitempty"`
	Message                 string          `json:"message,omitempty"`
	ImageRef                string          `json:"imageRef,omitempty"`
	Started                 time.Time       `json:"started"`
	Finished                time.Time       `json:"finished"`
	Duration                time.Duration   `json:"durationNanos"`
	Attempts                int             `json:"attempts"`
}

func persistStatus(s CacheStatus) persistedStatus {
	ps := persistedStatus{Namespace: s.ImageCache.Namespace, Name: s.ImageCache.Name, WorkType: s.WorkType, Batch: s.Batch,
		Started: s.Started, Finished: s.Finished, Duration: s.Duration, Requests: s.Requests, Counts: s.Counts}
	for _, r := range s.Results {
		ps.Results = append(ps.Results, persistedResult{Image: r.Request.Image, Node: r.Request.Node,
			ContainerRuntimeVersion: r.Request.ContainerRuntimeVersion, WorkType: r.Request.WorkType,
			ForceFullCache: r.Request.ForceFullCache, Status: r.Status, Reason: r.Reason, Message: r.Message,
			ImageRef: r.ImageRef, Started: r.Started, Finished: r.Finished, Duration: r.Duration, Attempts: r.Attempts})
	}
	return ps
}

func (ps persistedStatus) status() CacheStatus {
	ref := CacheRef{Namespace: ps.Namespace, Name: ps.Name}
	s := CacheStatus{ImageCache: ref, WorkType: ps.WorkType, Batch: ps.Batch, Complete: true,
		Started: ps.Started, Finished: ps.Finished, Duration: ps.Duration, Requests: ps.Requests,
		Counts: map[ImageWorkStatus]int{}}
	maps.Copy(s.Counts, ps.Counts)
	for _, r := range ps.Results {
		s.Results = append(s.Results, ImageWorkResult{
			Request: ImageWorkRequest{Image: r.Image, Node: r.Node, ContainerRuntimeVersion: r.ContainerRuntimeVersion,
				WorkType: r.WorkType, ForceFullCache: r.ForceFullCache, ImageCache: ref},
			Status: r.Status, Reason: r.Reason, Message: r.Message, ImageRef: r.ImageRef,
			Started: r.Started, Finished: r.Finished, Duration: r.Duration, Attempts: r.Attempts})
	}
	return s
}

// cloneStatus returns s with its own Counts and Results.
func cloneStatus(s CacheStatus) CacheStatus {
	s.Counts = maps.Clone(s.Counts)
	s.Results = slices.Clone(s.Results)
	return s
}

// ReadLastStatus returns the last completed status of each cache, by cache,
// as a manager opened with WithStateDir(dir) recorded it: what its status
// handler (WithStatusHandler) received when the cache's latest batch
// completed, in this or an earlier run of a manager on dir. It needs no
// manager and no runtime, and writes nothing (no directory is created, no
// temporary file removed), so it can be called while a manager runs.
//
// A cache that has not completed a batch yet has no entry; a missing dir or
// file is an empty map. A corrupt file is an ErrState error naming it. A
// symbolic link, FIFO or device planted at the file's name is refused, not
// followed. Fields a newer version added to the file are ignored.
//
// The statuses hold no credential. A deleted cache keeps its entry (the
// results of its removal) until a manager is next opened on dir.
func ReadLastStatus(dir string) (map[CacheRef]CacheStatus, error) {
	p, err := readLastStatusFile(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[CacheRef]CacheStatus, len(p.Caches))
	for _, ps := range p.Caches {
		s := ps.status()
		out[s.ImageCache] = s
	}
	return out, nil
}

func readLastStatusFile(dir string) (*persistedLastStatus, error) {
	// Fields this version does not know are ignored (not strict).
	var p persistedLastStatus
	found, err := readJSON(dir, lastStatusFile, false, &p.Version, lastStatusVersion, &p)
	if err != nil {
		return nil, err
	}
	if !found {
		p.Version = lastStatusVersion
	}
	for _, ps := range p.Caches {
		if ps.Namespace == "" || ps.Name == "" {
			return nil, fmt.Errorf("%w: %s is corrupt: a status names no cache", ErrState, filepath.Join(dir, lastStatusFile))
		}
	}
	return &p, nil
}

// loadLastStatusLocked reads the last statuses of the state directory into
// the manager, keeping those of the caches it loaded and of caches with
// removals pending. The file is a record, not state: a corrupt one is
// logged and replaced at the next completion rather than stopping the
// manager. m.mu must be held.
func (m *Manager) loadLastStatusLocked() {
	p, err := readLastStatusFile(m.opts.stateDir)
	if err != nil {
		m.logger.Error(err, "Ignoring the last statuses of the image caches")
		return
	}
	pending := map[CacheRef]bool{}
	for r := range m.removals {
		pending[r.cache] = true
	}
	for _, ps := range p.Caches {
		s := ps.status()
		if m.caches[s.ImageCache] != nil || pending[s.ImageCache] {
			m.lastStatus[s.ImageCache] = s
		}
	}
}

// recordLastStatusLocked keeps s as its cache's last completed status and,
// with a state directory, writes the last-status file. m.mu must be held.
func (m *Manager) recordLastStatusLocked(s CacheStatus) error {
	m.lastStatus[s.ImageCache] = cloneStatus(s)
	if m.opts.stateDir == "" {
		return nil
	}
	p := persistedLastStatus{Version: lastStatusVersion, Caches: make([]persistedStatus, 0, len(m.lastStatus))}
	for _, st := range m.lastStatus {
		p.Caches = append(p.Caches, persistStatus(st))
	}
	sort.Slice(p.Caches, func(i, j int) bool {
		a, b := p.Caches[i], p.Caches[j]
		return CacheRef{a.Namespace, a.Name}.String() < CacheRef{b.Namespace, b.Name}.String()
	})
	return writeJSON(m.opts.stateDir, lastStatusFile, p)
}

// completedStatus returns the last completed status of the cache: that of its
// latest batch that completed, in this manager's lifetime or, with
// WithStateDir, a previous manager's on the same directory (see
// ReadLastStatus); false if there is none. Status, by contrast, shows the
// latest batch of this manager's lifetime, complete or not.
func (m *Manager) completedStatus(namespace, name string) (CacheStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.lastStatus[CacheRef{Namespace: namespace, Name: name}]
	if !ok {
		return CacheStatus{}, false
	}
	return cloneStatus(s), true
}
