// Package credstamp remembers, on disk, when a credential last proved that
// it may pull a repository at a digest: the memory of a runtime shim's
// origin checks (crishim), so a pod's pull is checked at the origin once
// per TTL rather than on every pull, and the proofs of a pull manager's
// credential expiry (pullmanager.WithCredentialExpiry), where a pull
// recorded with a credential is the proof.
//
// A Key is (credential, repository, digest). The credential is a credential
// hash (imageruntime.CredentialHash), a fixed word ("node:"+hash,
// "anonymous"), or for a pull manager "secret:"+hash, "secret-object:" or
// "serviceaccount:" with the object's namespace, name and UID; never a
// secret. Each key has one file in the store's
// directory, named by the lowercase hex SHA-256 of its three fields, each
// length-prefixed, and holding a small versioned JSON document:
//
//	{"version":1,"credential":"…","repository":"…","digest":"…","verifiedAt":"2026-12-01T23:08:19.123456789Z"}
//
// # Guarantees
//
//   - Stamp writes the file with atomicfile (fresh temporary name, fsync,
//     rename, directory fsync): once it returns nil the stamp survives a
//     crash or a power loss, and a reader never sees a partial file. Memory
//     is updated only after the file is in place.
//   - Inherit copies one key's stamp time to another, never making it
//     newer than the original, so inheriting extends no trust.
//   - Fresh is true only for a key stamped less than ttl ago by the
//     store's clock; a stamp dated in the future (the clock was set back,
//     or a file was planted) is stale, so no clock step extends trust
//     beyond ttl. Fresh only reads memory and allocates nothing.
//   - A file vouches for nothing unless it is a regular file (not a
//     symbolic link, FIFO or device) of at most 16 KiB holding exactly the
//     version-1 document, with no unknown fields, non-empty UTF-8 fields, a
//     parsable time, and a key whose file name is its own name: a corrupt,
//     truncated, copied or renamed file is logged at Open and ignored.
//   - The directory is 0700 (narrowed at Open if wider), files 0600. Names
//     are always hashes: no key reaches a path, and nothing is opened
//     through a symbolic link.
//   - Prune removes expired and future-dated stamps, stamp-named files that
//     vouch for nothing and temporary files of interrupted writes, and no
//     other name.
//   - OpenReadOnly changes nothing on disk (no directory created or
//     narrowed, every write refused with ErrReadOnly): for a command that
//     explains what a running process decides.
//   - All methods are safe for concurrent use.
//
// # Non-guarantees
//
//   - A stamp says the credential was accepted for that repository and
//     digest at that time; the registry may have revoked it since. The TTL
//     bounds how long such a revocation goes unnoticed.
//   - One process writes a directory. Stamps another process writes after
//     Open are not seen by Fresh (Prune loads them if they are fresh), and
//     nothing locks the directory.
//   - The store is all in memory: one small entry per key, no bound. Prune
//     is how it shrinks.
//   - The files are not secret, but they are trusted: whoever may write the
//     directory may make the shim skip origin checks.
package credstamp
