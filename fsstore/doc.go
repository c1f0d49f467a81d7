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
//     imageRef for a pulled record). A "record name" below is any name that
//     starts with "sha256-" and does not end in ".tmp": the names the
//     kubelet reads.
//   - Content is exactly what accessor.EncodeIntent and
//     accessor.EncodePulledRecord produce, the kubelet's bytes; records are
//     stored with whole-second UTC times (ImagePulledRecord.ForStorage) and
//     read back in that form.
//   - v1alpha1 and v1beta1 files are read. When a writable store opens,
//     each readable v1alpha1 file is rewritten as v1beta1 under the name
//     computed from its content, as the kubelet does at start-up: in place
//     when the name matches, and under the proper name only when no file is
//     there yet. Unreadable entries are left in place and reported in one
//     "Error migrating …" log message with their count.
//   - Reads follow the kubelet: a missing file, or a file whose content
//     names another key, is "not found"; an unusable entry is
//     (nil, true, *accessor.CorruptRecordError) from GetImagePulledRecord
//     and that error from ImagePullIntentExists. Lists look only at record
//     names, and return the good records plus one *accessor.ListError
//     naming every bad entry. Unlike the kubelet, a list also reports a file
//     whose content names another key (cause ErrKeyMismatch) or holds the
//     other kind of record (ErrWrongKind) instead of returning it.
//
// # What reads as corrupt
//
// An entry under a record name is corrupt, on every read path (point reads,
// the first list served from the open-time snapshot, later lists), when:
//
//   - it cannot be decoded (cause: the decode error);
//   - it is larger than 32 MiB (accessor.ErrTooLarge); it is never read
//     whole;
//   - it is not a regular file: a sub-directory, a symbolic link (even to a
//     file inside the store), a FIFO, a socket or a device (ErrNotRegular).
//     The store never opens a device or a FIFO for reading and never reads
//     through a symbolic link.
//
// Point reads return the *accessor.CorruptRecordError, lists name it in the
// *accessor.ListError, and such an entry counts as a record file. Because
// no list is ever clean while one exists, a cache over the store
// (memstore.NewCache) stays non-authoritative and sends a lookup of that
// key to the store, which returns the error: the manager fails safe and
// must pull. A sub-directory under a name ending in ".tmp" is neither a
// record nor swept.
//
// # Durability
//
// A write encodes the record and, if the encoding is larger than the 32 MiB
// a read accepts, refuses it with accessor.ErrTooLarge without touching the
// disk. Otherwise it goes through the repository's one write primitive,
// atomicfile: a fresh temporary file in the same directory
// (".sha256-<hex>.<random>.tmp", a name the kubelet ignores, created
// exclusively so nothing already there is opened), written, fsynced and
// closed, renamed onto the record's name, and the directory fsynced. A
// delete removes the entry and fsyncs the directory. Directories created by
// New are fsynced into their parents. Therefore:
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
// A writable New removes the temporary files a crash left behind (every
// entry whose name ends in ".tmp", the kubelet's own "<name>.tmp" included,
// except sub-directories), and only once it holds the lock, so it never
// removes another writer's in-flight file. A read-only New removes nothing.
//
// # One writer
//
// A writable New takes an exclusive advisory lock (package filelock: flock,
// without waiting) on <kubelet dir>/image_manager/.pullrecords.lock
// (LockFile), a 0600 file beside the two directories, which the kubelet
// never reads, and writes its process ID and start time into it. While it
// is held, another writable New, in the same process or another, fails at
// once with a *LockedError naming the holder (errors.Is(err, ErrLocked)); so
// does Repair. Close releases the lock, and the kernel releases it when the
// process dies, however it dies; a stale lock file is simply reused. The
// lock file is opened through the os.Root and never through a symbolic link
// or a second hard link (ErrUnsafeLockFile). A read-only New (WithReadOnly)
// takes no lock, may run beside the writer and sees its files.
//
// # Symbolic links and hostile keys
//
// Keys never reach a path: the file name is always their hash, and keys
// that cannot round-trip (empty, not UTF-8) are rejected with
// accessor.ErrInvalidKey before the disk is touched. Every operation goes
// through an os.Root per directory, so nothing outside the directories can
// be reached, and record entries that are not regular files are corrupt
// (above). A write replaces a symbolic link, FIFO or socket under the
// record's name by rename, leaving a link's target unchanged, and fails on a
// sub-directory; a delete removes a link itself, or an empty sub-directory.
// The image_manager, pulling and pulled directories must be real
// directories: New refuses a symbolic link there with ErrUnsafeDir. The
// kubelet directory itself may be a symbolic link (it is configuration).
//
// # Memory and the open-time snapshot
//
// New reads each directory once (one worker per core) and keeps the set of
// record names it found, which writes and deletes maintain: the counts
// (accessor.RecordCounter) never scan the disk. On Linux the directory is
// listed with getdents64, whose entry types spare an lstat per file, and an
// entry listed as a regular file is read with openat (O_NOFOLLOW,
// O_NONBLOCK), fstat (it must still be a regular file within the size
// limit, else the careful path above decides), read and close on the
// directory's descriptor; any other entry takes the careful path.
//
// A record file in the exact form the kubelet writes (v1beta1) is checked
// at open (accessor.ValidateCanonical) and only its bytes are kept, without
// the prefix they all share, to be decoded by the first list; every other
// file is decoded at open. What New read, errors included, is handed to the
// first ListImagePullIntents, ListImagePulledRecords or
// RangeImagePulledRecords call after New, so a caller that loads everything
// at start-up reads each file once and decodes it once; the store drops its
// reference at that point and never shares the values. Range releases each
// kept file as soon as its record was handed over, so a cache warming up
// never holds every decoded record at once. If a write or delete of that
// kind happens first, or a migration wrote a file under a new name, the
// first list reads the disk like every later list.
//
// # Reading without the open-time scan
//
// A read-only store opened WithoutScan reads no entry at open: a point read
// (GetImagePulledRecord, ImagePullIntentExists) then lists nothing and reads
// exactly the one file FileName(key) names, with every rule above: a
// non-regular entry, an oversized file, an undecodable file or an unknown
// version under that name is a *accessor.CorruptRecordError, never "not
// found", and v1alpha1 files decode. Its lists read the disk and its counts
// list the directory on every call. WalkImagePulledRecords and
// WalkImagePullIntents (on any store) hand out every entry as the files are
// read, on one worker per core, holding a few blocks of 256 decoded records
// at most: ByFileName reads each file once, ByKey reads each file twice
// (the first time for its key only, kept with its name) to hand the records
// out sorted by key. The pullrecords get and ls commands use them.
//
// # Inspection and repair
//
// Inspect reads both directories without writing, on one worker per core,
// and reports every entry with a problem (Problem values), in name order; a
// regular file under a record name is read through the directory's
// descriptor (openat, fstat, read, close: the fstat gives its mode and
// owner) and a file in the kubelet's form is checked without being decoded.
// Repair, under the store's lock, quarantines bad entries under
// image_manager/quarantine, removes temporary files, rewrites v1alpha1 files
// and fixes modes. The pullrecords fsck command uses them.
//
// Repair never turns a check's "must pull" into "may use". An entry that a
// point read reports as corrupt (undecodable, oversized, of the wrong kind,
// not a regular file) makes every check for its key answer "must pull"
// under every policy, and its key cannot be recovered from its name (a
// hash). Removing it would leave neither record nor intent for that key, so
// a present image would look preloaded, and under the default policy
// (NeverVerifyPreloadedImages) every pod could use it; an intent's loss
// would also hide a pull the kubelet never finished recording. So Repair
// moves such an entry to quarantine and, in the same atomic step
// (renameat2 with RENAME_EXCHANGE, or where that is missing a hard link
// and a rename), leaves under its name a fail-safe placeholder: a regular
// 0600 file whose content is not JSON, which this store and the kubelet's
// strict decoder both read as corrupt (ProblemPlaceholder in Inspect's
// report). The kubelet's next pull of that image rewrites the file like
// any other. An entry that cannot be swapped without its name being absent
// for a moment (a directory, where the exchange is not available) is left
// as it is. Entries that no check reads are simply moved: a file whose
// content names another key ("not found" for both keys, before and after),
// and names that are not record names.
//
// # Non-guarantees
//
//   - The lock keeps out other Stores and Repair, not a stock kubelet, which
//     takes no lock. Do not open a writable Store on the directory of a
//     running kubelet: both would write, the counts and the open-time
//     snapshot would go stale, and the sweep at open could remove the
//     kubelet's in-flight temporary file. Beside a stock kubelet, open
//     read-only.
//   - The lock is advisory: a process that ignores it, or removes the lock
//     file and creates another, is not stopped.
//   - Counts are the number of record entries present, readable or not, as
//     the kubelet's gauge counts them; they do not see entries changed by
//     other processes after open (a read-only store's counts go stale while
//     a writer runs).
//   - Reads take no lock: a read concurrent with a write of the same key
//     returns the old or the new record.
//   - Nothing protects against an attacker who can write to the
//     directories; the checks above keep a confused or buggy writer, or a
//     stray entry, from making the store read or write outside them or
//     answer "absent" for a key it cannot read.
package fsstore
