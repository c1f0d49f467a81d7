// Package fsstore is the kubelet-compatible, crash-safe directory store for
// pull records: an accessor.PullRecordsAccessor that reads and writes the
// same files as the upstream kubelet's image pull manager, in
// <kubelet dir>/image_manager/pulling (intents) and
// <kubelet dir>/image_manager/pulled (pulled records).
//
// # Compatibility
//
//   - Directories are created 0700 with their missing parents; files are
//     0600 whatever the umask.
//   - A record lives in the file FileName(key): "sha256-" and the lowercase
//     hex SHA-256 of the raw key (the pod's image string for an intent, the
//     imageRef for a pulled record).
//   - Content is exactly what accessor.EncodeIntent and
//     accessor.EncodePulledRecord produce, the kubelet's bytes; records are
//     stored with whole-second UTC times (ImagePulledRecord.ForStorage) and
//     read back in that form.
//   - v1alpha1 and v1beta1 files are read. At open, each readable v1alpha1
//     file is rewritten as v1beta1 under the name computed from its content,
//     as the kubelet does at start-up: in place when the name matches, and
//     under the proper name only when no file is there yet. Unreadable files
//     are left in place and reported in one "Error migrating …" log message
//     with their count.
//   - Reads follow the kubelet: a missing file, or a file whose content
//     names another key, is "not found"; an undecodable file is
//     (nil, true, *accessor.CorruptRecordError) from GetImagePulledRecord
//     and an error from ImagePullIntentExists. Lists read only names that
//     start with "sha256-" and do not end in ".tmp", skip sub-directories,
//     and return the good records plus one *accessor.ListError naming every
//     bad file. Unlike the kubelet, a list also reports a file whose content
//     names another key (cause ErrKeyMismatch) or holds the other kind of
//     record (ErrWrongKind) instead of returning it.
//
// # Durability
//
// A write encodes the record, writes it to a fresh temporary file in the
// same directory (".sha256-<hex>.<random>.tmp", a name the kubelet ignores),
// fsyncs and closes it, renames it onto the record's name and fsyncs the
// directory. A delete removes the file and fsyncs the directory. Directories
// created by New are fsynced into their parents. Therefore:
//
//   - After a process crash (kill -9) at any point, every record is wholly
//     old or wholly new: never torn, never missing when it existed before.
//     A write or delete that returned nil is visible after restart.
//   - After a power loss, a write or delete that returned nil survives, as
//     far as the file system honours fsync (ext4 and XFS do; some
//     virtualised disks do not).
//   - With WithoutSync (tests and benchmarks only) nothing is fsynced: a
//     process crash still never tears a record, but a power loss may lose
//     recent writes or leave an empty file, which then reads as corrupt.
//   - A failed write or delete returns an error and leaves the old record in
//     place, except that a failure of the directory fsync after the rename
//     or removal leaves the change visible but perhaps not durable; that
//     error matches accessor.ErrNotDurable, so a cache applies the change too.
//
// New removes temporary files left behind by a crash (any name ending in
// ".tmp", including the kubelet's own "<name>.tmp"), unless read-only.
//
// # Symbolic links and hostile keys
//
// Keys never reach a path: the file name is always their hash, and keys
// that cannot round-trip (empty, not UTF-8) are rejected with
// accessor.ErrInvalidKey before the disk is touched. Every operation goes
// through an os.Root per directory, so nothing outside the directories can
// be reached. Beyond that, the store never reads through a symbolic link,
// even one pointing inside its directories: a record file that is a symbolic
// link, a directory, a FIFO or a device reads as corrupt (a
// *accessor.CorruptRecordError with cause ErrNotRegular, so the manager fails
// safe and must pull), and a list reports it. A write replaces such a link
// by rename, leaving its target unchanged; a delete removes the link itself.
// The image_manager, pulling and pulled directories must be real
// directories: New refuses a symbolic link there with ErrUnsafeDir. The
// kubelet directory itself may be a symbolic link (it is configuration).
// Files larger than 32 MiB are corrupt (cause accessor.ErrTooLarge) and are
// never read whole.
//
// # Memory and the open-time snapshot
//
// New reads each directory once (one decoding worker per core)
// and keeps the set of file names it found, which writes and deletes
// maintain: the counts (accessor.RecordCounter) never scan the disk. What
// New decoded is handed, without copying, to the first
// ListImagePullIntents or ListImagePulledRecords call after New, so a
// caller that loads everything at start-up reads each file once; the store
// drops its reference at that point and never shares the values. If a write
// or delete of that kind happens first, or a migration wrote a file under a
// new name, the first list reads the disk like every later list.
//
// # Inspection and repair
//
// Inspect reads both directories without writing and reports every entry
// with a problem (Problem values); Repair quarantines bad entries under
// image_manager/quarantine, removes temporary files, rewrites v1alpha1
// files and fixes modes. The pullrecords fsck command uses them.
//
// # Non-guarantees
//
//   - One process per directory. Do not run a Store beside a live kubelet
//     (or another Store) writing the same directory: there is no file lock,
//     the counts and the open-time snapshot would go stale, and the sweep at
//     open would remove the other writer's in-flight temporary files.
//   - Counts are the number of record files present, readable or not, as
//     the kubelet's gauge counts them; they do not see files changed by
//     other processes after open.
//   - Reads take no lock: a read concurrent with a write of the same key
//     returns the old or the new record.
//   - Nothing protects against an attacker who can write to the
//     directories; the checks above keep a confused or buggy writer from
//     making the store read or write outside them.
package fsstore
