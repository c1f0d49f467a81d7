package imagecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/atomicfile"
)

// MaxCacheFileSize is the largest cache file, in bytes, ReadCacheFile
// reads: a cache file is read whole and parsed, and a node's caches fit in
// far less. A larger file is refused, never truncated.
const MaxCacheFileSize = 4 << 20

// maxCacheFileProblems bounds the problems one CacheFileError lists; one
// more entry then says that more were not shown.
const maxCacheFileProblems = 20

// CacheFileError is a cache file that cannot be used: it does not parse, or
// one or more of its caches do not validate. Problems lists every problem
// found (at most 20, then "more problems not shown"), each naming the cache
// (by its position, and its namespace/name when it has both) and the field
// in the file's terms; no problem holds a credential. It matches
// ErrInvalidCacheFile.
//
// The strings come from the file as they are (a namespace may hold control
// characters): a caller printing them on a terminal escapes them.
type CacheFileError struct {
	// File is the name the caller gave the file (its path, or "standard
	// input").
	File string
	// Problems are the problems, in the order of the file.
	Problems []string
}

func (e *CacheFileError) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("%s: %s; nothing applied", e.File, e.Problems[0])
	}
	return fmt.Sprintf("%s: %d problems (listed above); nothing applied", e.File, len(e.Problems))
}

// Is makes errors.Is(err, ErrInvalidCacheFile) true for a *CacheFileError.
func (e *CacheFileError) Is(target error) bool { return target == ErrInvalidCacheFile }

func cacheFileProblem(file, format string, args ...any) *CacheFileError {
	return &CacheFileError{File: file, Problems: []string{fmt.Sprintf(format, args...)}}
}

// ParseCacheFile parses and validates a cache file (YAML or JSON): a list
// of image caches, or a single one, each a mapping with
//
//	namespace        a Kubernetes namespace (required)
//	name             a Kubernetes object name (required)
//	images           a non-empty list of image references the kubelet
//	                 accepts, no image listed twice (required)
//	refreshInterval  a Go duration (30m, 24h) or a number of days (7d)
//	forceFullCache   true or false
//	pullSecret       namespace, name and uid of the Kubernetes secret the
//	                 pulls are recorded for (all required), and the inline
//	                 registry credential: username, password, email
//
// and nothing else. name is what the file is called in messages. Every
// problem is found before any is reported, so a file is usable entirely or
// not at all: on any problem it returns nil and a *CacheFileError
// (ErrInvalidCacheFile). A cache listed twice (the same namespace and name)
// is a problem. The caches are returned in the order of the file, with the
// images as written.
func ParseCacheFile(name string, data []byte) ([]ImageCache, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, "yaml: "); ok {
			msg = rest
		}
		return nil, cacheFileProblem(name, "not YAML or JSON: %s", msg)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, cacheFileProblem(name, "not YAML or JSON: %v", err)
	}
	var items []any
	switch t := doc.(type) {
	case nil:
		return nil, cacheFileProblem(name, "no image caches")
	case []any:
		items = t
	case map[string]any:
		items = []any{t}
	default:
		return nil, cacheFileProblem(name, "want a list of image caches (\"- namespace: ...\"), got %s", describeValue(doc))
	}
	if len(items) == 0 {
		return nil, cacheFileProblem(name, "no image caches")
	}
	v := &cacheFileValidator{}
	caches := make([]ImageCache, 0, len(items))
	seen := map[CacheRef]int{}
	for i, item := range items {
		c, ok := v.cache(i+1, item)
		if c.Namespace != "" && c.Name != "" {
			if first, dup := seen[c.Ref()]; dup {
				v.addf("cache %d (%s): the same namespace and name as cache %d; list each cache once", i+1, c.Ref(), first)
				continue
			}
			seen[c.Ref()] = i + 1
		}
		if ok {
			caches = append(caches, c)
		}
	}
	if len(v.problems) > 0 {
		return nil, &CacheFileError{File: name, Problems: v.problems}
	}
	return caches, nil
}

// ReadCacheFile reads and parses (ParseCacheFile) the cache file at path,
// named by path in messages. The file must be a regular file: a symbolic
// link at path is not followed, and a FIFO, device or directory is refused
// (checked on the opened file). A file larger than MaxCacheFileSize is a
// *CacheFileError refused before it is parsed. Any other read failure is
// returned wrapped, starting "cache file <path>: " (no file at path matches
// fs.ErrNotExist).
//
// The file may hold registry passwords: keep it mode 0600, owned by the
// process that reads it.
func ReadCacheFile(path string) ([]ImageCache, error) {
	data, err := atomicfile.ReadFile(filepath.Dir(path), filepath.Base(path), MaxCacheFileSize)
	switch {
	case errors.Is(err, atomicfile.ErrTooLarge):
		return nil, cacheFileProblem(path, "larger than %d MiB; refusing to read it", MaxCacheFileSize>>20)
	case err != nil:
		return nil, fmt.Errorf("cache file %s: %w", path, err)
	}
	return ParseCacheFile(path, data)
}
