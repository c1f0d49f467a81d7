package fsstore

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// open reads d once: it sweeps temporary files, decodes every record file,
// rewrites v1alpha1 files as v1beta1, fills the set of present names and
// keeps the decoded files for the first list.
func (s *Store) open(logger klog.Logger, d *dir) error {
	names, temps, err := d.scan()
	if err != nil {
		return fmt.Errorf("listing %s: %w", d.path, err)
	}
	if !s.opts.readOnly && len(temps) > 0 {
		s.sweep(logger, d, temps)
	}
	entries := d.load(names, s.opts.workers, d.kind == accessor.KindImagePulledRecord)
	for _, e := range entries {
		d.present[e.name] = struct{}{}
	}
	keep := true
	if !s.opts.readOnly {
		keep = s.migrate(logger, d, entries)
	}
	if keep {
		// Non-nil even when empty: nil means "read the disk".
		if entries == nil {
			entries = []loaded{}
		}
		d.snapshot = entries
	}
	return nil
}

// sweep removes temporary files left by a crash, ours (".sha256-….tmp") and
// the kubelet's ("sha256-….tmp").
func (s *Store) sweep(logger klog.Logger, d *dir, temps []string) {
	var errs []error
	removed := 0
	for _, name := range temps {
		if err := d.fs.Remove(name); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", filepath.Join(d.path, name), err))
			continue
		}
		removed++
	}
	if removed > 0 && !s.opts.noSync {
		if err := d.fs.SyncDir(); err != nil {
			errs = append(errs, fmt.Errorf("syncing %s: %w", d.path, err))
		}
	}
	if removed > 0 {
		logger.Info("Removed temporary files left by an interrupted write", "dir", d.path, "count", removed)
	}
	if len(errs) > 0 {
		logger.Error(errs[0], "Error removing temporary files", "dir", d.path, "failed", len(errs))
	}
}

// migrate rewrites every decodable v1alpha1 file of d as v1beta1 under the
// name computed from its content, as the kubelet does at start-up. A file
// whose name already matches is rewritten in place; one stored under another
// name is written to its proper name only if no file is there yet (an
// existing file may be newer). Undecodable files are left in place and
// counted in one logged error. It reports whether the decoded entries still
// describe the directory.
func (s *Store) migrate(logger klog.Logger, d *dir, entries []loaded) (unchanged bool) {
	unchanged = true
	var errs []error
	migrated := 0
	for i := range entries {
		e := &entries[i]
		if e.err != nil && !errors.Is(e.err, ErrKeyMismatch) {
			errs = append(errs, e.err)
			continue
		}
		if e.dec.Version != accessor.VersionV1alpha1 {
			continue
		}
		target := FileName(e.dec.Key())
		if target != e.name && d.isPresent(target) {
			continue
		}
		data, err := accessor.Encode(e.dec)
		if err == nil {
			err = d.put(target, data, !s.opts.noSync)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rewriting %s as %s: %w", filepath.Join(d.path, e.name), target, err))
			continue
		}
		migrated++
		if target == e.name {
			e.dec.Version = accessor.VersionV1beta1
		} else {
			unchanged = false
		}
	}
	if migrated > 0 {
		logger.Info("Migrated pull record files to the current version", "dir", d.path, "version", accessor.CurrentVersion, "count", migrated)
	}
	if len(errs) > 0 {
		// One message with the first error and the count; a list call reports
		// every bad file.
		logger.Error(errs[0], "Error migrating "+d.what, "dir", d.path, "failed", len(errs))
	}
	return unchanged
}
