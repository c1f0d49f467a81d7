package imagecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pullrecords/pullrecords/atomicfile"
)

const (
	stateFile    = "imagecache-state.json"
	stateVersion = 1
)

// persisted is the state file's content. It holds the cache specs including
// their inline credentials (PullSecret.Password), so the file is 0600 in a
// 0700 directory. A pull secret given by DockerConfigPath is kept as the
// path alone.
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

// readState opens dir for a manager: it creates dir (0700) if needed, removes
// stray temporary files of an interrupted write (best effort), and reads the
// state file.
func readState(dir string) (*persisted, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	d, err := atomicfile.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	defer d.Close()
	_, _ = d.RemoveTemps(stateFile)
	_, _ = d.RemoveTemps(lastStatusFile)
	return readStateFile(dir)
}

// readStateFile reads dir's state file and changes nothing. A missing file
// (or directory) is an empty state.
func readStateFile(dir string) (*persisted, error) {
	var p persisted
	found, err := readJSON(dir, stateFile, true, &p.Version, stateVersion, &p)
	if err != nil {
		return nil, err
	}
	if !found {
		p.Version = stateVersion
	}
	return &p, nil
}

// readJSON decodes the JSON file dir/name into v, whose version field is at
// version and must read want; it reports false, and leaves v as it is, for a
// missing file (or directory). With strict, unknown fields are refused. The file is read through
// atomicfile.ReadFile: the state holds credentials, and a link planted at
// its name must not make the manager read another file.
func readJSON(dir, name string, strict bool, version *int, want int, v any) (bool, error) {
	path := filepath.Join(dir, name)
	data, err := atomicfile.ReadFile(dir, name, maxStateSize)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrState, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("%w: %s is corrupt: %v", ErrState, path, err)
	}
	if *version != want {
		return false, fmt.Errorf("%w: %s has unsupported version %d", ErrState, path, *version)
	}
	return true, nil
}

// writeJSON replaces dir/name with v as JSON, atomically, durably and with
// mode 0600 (see atomicfile.WriteFile).
func writeJSON(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if err := atomicfile.WriteFile(dir, name, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	return nil
}

// maxStateSize bounds the state file read; a larger one is refused.
const maxStateSize = 64 << 20

// spec is the applied cache a persisted entry holds, validated.
func (pc persistedCache) spec() (ImageCache, error) {
	c, err := normalize(ImageCache{Namespace: pc.Namespace, Name: pc.Name, Images: pc.Images,
		ForceFullCache: pc.ForceFullCache, PullSecret: pc.PullSecret, RefreshInterval: pc.RefreshInterval})
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrState, err)
	}
	return c, nil
}

// LoadState returns the caches applied in the state directory dir (what
// Caches returns on a manager opened with WithStateDir(dir)), sorted by
// namespace/name, without a manager and without writing anything: it
// neither creates dir nor removes temporary files. A missing dir or state
// file is no caches. A corrupt state file is an ErrState error. The caches
// carry their pull secrets' inline credentials, or the DockerConfigPath of
// secrets given by path.
func LoadState(dir string) ([]ImageCache, error) {
	p, err := readStateFile(dir)
	if err != nil {
		return nil, err
	}
	out := make([]ImageCache, 0, len(p.Caches))
	for _, pc := range p.Caches {
		c, err := pc.spec()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	sortCaches(out)
	return out, nil
}

// writeState replaces dir's state file atomically and durably, never
// through a symbolic link, with mode 0600 whatever the umask (atomicfile
// sets the mode on the temporary file before the rename): see
// atomicfile.Replace.
func writeState(dir string, p *persisted) error {
	return writeJSON(dir, stateFile, withoutSecretMaterial(p))
}

// withoutSecretMaterial returns p, or a copy of it in which a pull secret
// given by DockerConfigPath keeps no inline field, so that such a secret
// never puts credentials in the state file. (Apply refuses a secret with
// both; this holds whatever reaches the file.)
func withoutSecretMaterial(p *persisted) *persisted {
	out := p
	for i, pc := range p.Caches {
		s := pc.PullSecret
		if s == nil || s.DockerConfigPath == "" || (s.Username == "" && s.Password == "" && s.Email == "") {
			continue
		}
		if out == p {
			cp := *p
			cp.Caches = slices.Clone(p.Caches)
			out = &cp
		}
		clean := *s
		clean.Username, clean.Password, clean.Email = "", "", ""
		out.Caches[i].PullSecret = &clean
	}
	return out
}
