package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pullrecords/pullrecords/imagecache"
)

// cacheSpec is one image cache as the declared-caches file keeps it, in
// the cache file format (imagecache.ParseCacheFile parses and validates
// both). Specs are made by specOf from parsed caches, never decoded and
// used unparsed.
type cacheSpec struct {
	Namespace       string      `json:"namespace"`
	Name            string      `json:"name"`
	Images          []string    `json:"images"`
	ForceFullCache  bool        `json:"forceFullCache,omitempty"`
	RefreshInterval string      `json:"refreshInterval,omitempty"`
	PullSecret      *secretSpec `json:"pullSecret,omitempty"`
	// interval is RefreshInterval parsed, set by specOf.
	interval time.Duration
}

// secretSpec is a registry credential and the Kubernetes secret it comes from.
type secretSpec struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Username  string `json:"username"`
	Password  string `json:"password"`
	Email     string `json:"email,omitempty"`
}

func (s cacheSpec) ref() string { return s.Namespace + "/" + s.Name }

// imageCache is the manager's form of s.
func (s cacheSpec) imageCache() imagecache.ImageCache {
	c := imagecache.ImageCache{Namespace: s.Namespace, Name: s.Name, Images: append([]string(nil), s.Images...),
		ForceFullCache: s.ForceFullCache, RefreshInterval: s.interval}
	if p := s.PullSecret; p != nil {
		c.PullSecret = &imagecache.PullSecret{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			Username: p.Username, Password: p.Password, Email: p.Email}
	}
	return c
}

// specOf is the declared form of an applied cache.
func specOf(c imagecache.ImageCache) cacheSpec {
	s := cacheSpec{Namespace: c.Namespace, Name: c.Name, Images: append([]string(nil), c.Images...), ForceFullCache: c.ForceFullCache,
		interval: c.RefreshInterval}
	if c.RefreshInterval > 0 {
		s.RefreshInterval = c.RefreshInterval.String()
	}
	if p := c.PullSecret; p != nil {
		s.PullSecret = &secretSpec{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Username: p.Username, Password: p.Password, Email: p.Email}
	}
	return s
}

// maxCacheFileSize bounds a cache file and the declared-caches file (the
// library's bound, which imagecache.ReadCacheFile applies too).
const maxCacheFileSize = imagecache.MaxCacheFileSize

// readLimited reads r (named name in messages), refusing more than limit
// bytes before parsing anything: by its size when it is a regular file,
// else by reading at most limit+1 bytes.
func readLimited(name string, r io.Reader, limit int64) ([]byte, error) {
	tooLarge := func(size string) error {
		return fmt.Errorf("%s is larger than %d MiB (%s); refusing to read it", name, limit>>20, size)
	}
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
			return nil, tooLarge(plural(int(fi.Size()), "byte"))
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge("more than " + plural(int(limit), "byte"))
	}
	return data, nil
}

// parseCacheSpecs parses and validates a cache file with
// imagecache.ParseCacheFile (whose *imagecache.CacheFileError it returns)
// and gives the caches in their declared form.
func parseCacheSpecs(file string, data []byte) ([]cacheSpec, error) {
	caches, err := imagecache.ParseCacheFile(file, data)
	if err != nil {
		return nil, err
	}
	specs := make([]cacheSpec, 0, len(caches))
	for _, c := range caches {
		specs = append(specs, specOf(c))
	}
	return specs, nil
}
