package fsstore

// WithoutScan, with WithReadOnly, opens the store without reading its
// directories: New checks that image_manager, pulling and pulled are real
// directories and opens them, and reads no entry, so opening costs the same
// whatever the number of records. It is for a process that looks up a few
// keys (pullrecords get) or streams the records once (pullrecords ls).
//
//   - GetImagePulledRecord and ImagePullIntentExists read the one entry
//     FileName(key) names, exactly as on any store: a missing file, or one
//     whose content names another key, is "not found"; a sub-directory,
//     symbolic link, FIFO, socket or device under that name, a file larger
//     than 32 MiB, a file that does not decode and a file of an unknown
//     version are errors (*accessor.CorruptRecordError), never "not found";
//     v1alpha1 files decode. No other entry is listed, opened or read.
//   - Lists, ranges and walks read the directory on every call (there is no
//     open-time snapshot), and the counts list the directory on every call
//     (0 if it cannot be listed).
//
// New fails with ErrInvalidOption when WithoutScan is given without
// WithReadOnly: a writable store must read its directories at open to sweep
// and migrate.
func WithoutScan() Option { return func(o *options) { o.noScan = true } }

// countOf returns the number of record entries of d: the set kept since open,
// or, for a store opened WithoutScan, what the directory lists now.
func (s *Store) countOf(d *dir) int {
	if !s.opts.noScan {
		return d.count()
	}
	end, err := s.begin(false)
	if err != nil {
		return 0
	}
	defer end()
	names, _, err := d.scan()
	if err != nil {
		return 0
	}
	return len(names)
}
