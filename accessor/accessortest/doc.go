// Package accessortest is the conformance suite every
// accessor.PullRecordsAccessor must pass, and a few helpers for tests that
// need records with predictable content.
//
// A store's test calls Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
//			return mystore.New(t.TempDir())
//		})
//	}
//
// Every subtest asks the constructor for a fresh, empty store.
//
// # What the suite checks
//
//   - Round trips of intents (write, exists, list, delete) and pulled records
//     (write, get, list, delete) with secrets, service accounts, node-wide
//     access, several image names, an empty mapping and a nil mapping. Empty
//     and nil slices and maps are treated as equal, because the on-disk format
//     cannot tell them apart.
//   - Missing keys: Get is (nil, false, nil), Exists is (false, nil), and
//     deleting a missing intent or record is not an error. Intents and records
//     are separate kinds: an intent never answers a record lookup and the
//     other way round.
//   - Overwriting replaces the stored value.
//   - LastUpdatedTime reads back in accessor.StorageTime form (UTC, whole
//     seconds) even when a sub-second time in another zone was written.
//   - Values are copied in and out: mutating a written record, or a record
//     returned by Get or List, changes nothing stored.
//   - Keys that are empty or not valid UTF-8 are rejected with an error
//     matching accessor.ErrInvalidKey and nothing is stored; lookups and
//     deletes of such keys either report "not found" or return that error.
//     Writing a nil record returns accessor.ErrNilRecord.
//   - Lists return every stored key exactly once with 0, 1 and 300 items.
//   - Odd keys round-trip: NUL bytes, path traversal strings, a 64 KiB string,
//     unicode, JSON and HTML special characters.
//   - Concurrency (meaningful under -race): 8 goroutines run 200 operations
//     each on their own keys and on a few shared keys. Every read of an own
//     key must equal that goroutine's last write, lists must show exactly the
//     own keys the goroutine holds, and any shared value read must be one that
//     some goroutine wrote in full (no torn values).
//
// # What the suite cannot check
//
// Some behaviour cannot be produced through the interface, so stores that can
// hold such data must test it themselves:
//
//   - A stored item whose content names another key than the one it is
//     stored under (a hand-edited file, or a hash collision in a file store)
//     must read as "not found". Only a store whose storage can be changed
//     behind its back (files) can hold such data.
//   - Corrupt stored data must make Get return (nil, true, err) and lists
//     return the good values plus an *accessor.ListError.
//   - Durability across a crash or a restart.
//
// The suite does not measure speed; stores put that in benchmarks.
//
// # Fault injection
//
// Faulty wraps any accessor for tests of code that uses one (a manager, a
// cache): it logs every call (method and key), passes it on, and fails
// the calls it is told to, by method name, on the nth call only or on every
// call. Corrupt makes a stored record read as an undecodable file does.
// Accessor passes through exactly the optional interfaces
// (accessor.RecordPeeker, RecordCounter, PulledRecordRanger) the wrapped
// accessor has, and claims none it lacks:
//
//	store := accessortest.Faulty(memstore.New())
//	store.FailNth("WriteImagePulledRecord", 2, syscall.ENOSPC)
//	m := newManager(store.Accessor())
//	// ... the second record write fails; store.Calls() tells what ran.
//
// With no fault set it is the wrapped accessor, logged: Faulty over
// memstore passes Run.
package accessortest
