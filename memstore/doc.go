// Package memstore holds pull records in memory: Store, a complete in-memory
// accessor.PullRecordsAccessor, and Cache, a write-through cache that sits in
// front of any PullRecordsAccessor (usually the kubelet-compatible file store).
//
// # Store
//
// New returns an empty Store. It passes accessortest.Run: keys are checked
// with accessor.ValidateKey, a nil record is accessor.ErrNilRecord, values are
// copied in and out with LastUpdatedTime in accessor.StorageTime form, every
// method is safe for concurrent use (reads take no lock, and each write is
// atomic per key), and deleting a missing key is not an error. Its lists
// never fail. It also implements accessor.RecordPeeker and
// accessor.RecordCounter. Nothing is persisted.
//
// # Cache
//
// NewCache lists the delegate's intents and records once and keeps them. From
// then on:
//
//   - Writes and deletes go to the delegate first and change memory only if
//     the delegate applied the change: it returned nil, or an error matching
//     accessor.ErrNotDurable (the change is visible in the delegate but may
//     not survive a power cut), which is returned to the caller after memory
//     is changed, so the cache never disagrees with the delegate. Any other
//     error leaves memory alone: a failed write leaves the old value cached
//     and a failed delete leaves the entry. Writes,
//     deletes and read-through misses of one key are serialised by a per-key
//     lock (keys are spread over striped locks by hash modulo the number of
//     stripes, 64 of them). A delegate error that refuses a write (for
//     example accessor.ErrTooLarge) changes nothing.
//   - Authoritative: when a kind's warm-up list succeeded without any error,
//     the cache is authoritative for that kind (intents and records are
//     tracked separately), whatever the number of items: there is no size
//     cap and no eviction. A miss then means "does not exist" and is answered
//     without calling the delegate, and lists are served from memory.
//     This rests on one contract with the delegate: a list that returns no
//     error holds every key the delegate has, so a key it cannot read must
//     make the list fail. fsstore keeps it for every unusable entry under a
//     record name (undecodable, oversized, or not a regular file: a
//     sub-directory, symbolic link, FIFO, socket or device).
//   - Not authoritative: when a kind's list returned an error (for example an
//     *accessor.ListError for a corrupt file), the cache keeps the items it
//     got, but a miss reads the delegate. A found item is cached; errors are
//     returned as the delegate gave them and never cached, so a lookup of a
//     corrupt key goes to the delegate every time and keeps being reported
//     as (nil, true, err) for a record and (false, err) for an intent: the
//     manager fails safe and must pull. Lists go to the delegate. A listed
//     item whose key fails accessor.ValidateKey also makes its kind
//     non-authoritative. Writes and deletes never make a kind authoritative;
//     only a Reload with a clean list does. Authoritative reports whether
//     both kinds are authoritative.
//   - Reload lists the delegate again and replaces the cache contents; each
//     kind becomes authoritative again if its list is clean. Call it after the
//     files were changed behind the cache (an operator edit, a repair): an
//     authoritative cache does not see such changes until then. Writes,
//     deletes and read-through misses wait while Reload runs; hits do not.
//   - Counts come from the delegate if it implements accessor.RecordCounter,
//     else from the cache.
//
// # The hot path and immutability
//
// PeekImagePulledRecord and ImagePullIntentExists answer a hit (and, when
// authoritative, a miss) with a lock-free map read and no allocation, and
// scale across cores. The record Peek returns is shared by every caller and
// by the cache itself: it is read-only, and modifying it or anything it points
// to (its map, its slices) is a bug that corrupts what every later caller
// sees. It stays valid, unchanged, after the key is overwritten or deleted;
// later peeks return the new value. GetImagePulledRecord and the lists return
// deep copies the caller owns, which costs one map allocation per record.
//
// # Memory
//
// Records are kept in a compact form, not as ImagePulledRecord values (a Go
// map of even two names costs about 700 bytes): the imageRef and the names
// in one string, and one encoded string per name for its credentials. The
// credentials of a name (secrets, service accounts, the node-wide flag)
// repeat across the records of a node, and a warm-up shares equal ones
// between entries; writes after it store their own. Strings hold no
// pointers, so the garbage collector does not scan them. 100,000 records of
// two names each, with their own imageRefs and names and pooled
// credentials, take about 380 bytes each, some 38 MB in all (see
// TestCacheMemoryPer100kRecords); with every secret distinct, about 760. A
// record that has been peeked also keeps its shared ImagePulledRecord form,
// about 1 KB more, until it is replaced or deleted; in practice only the
// records of images that containers start from are peeked.
//
// A warm-up over a delegate that implements accessor.PulledRecordRanger
// (fsstore does) takes the records one at a time, on the delegate's
// goroutines, and never holds every decoded record at once.
//
// # Non-guarantees
//
// Lists are not snapshots: a key written or deleted while a list runs may or
// may not appear, though every other key appears exactly once. Neither type
// persists anything. The Cache does not watch its delegate for changes: an
// entry that appears in the delegate after the warm-up (an operator's edit, a
// file planted in the store's directories), readable or corrupt, is not seen
// by an authoritative cache, which keeps answering "does not exist" for its
// key until Reload.
package memstore
