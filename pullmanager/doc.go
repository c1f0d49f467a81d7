// Package pullmanager decides, for a pod that asks for an image already on
// the node, whether the pod must prove to the registry that its own
// credentials can pull the image ("ensure secret pulled images", KEP-2535).
// It also holds the credential verification policies, the allowlist, the
// no-op manager for nodes with the feature off, and the manager's metrics.
//
// # Flow
//
// A kubelet (or a runtime shim) calls RecordPullIntent before a pull, then
// exactly one of RecordImagePulled or RecordImagePullFailed. Before starting
// a container whose image is present it calls MustAttemptImagePull; true
// means "pull with the pod's credentials first". After image garbage
// collection it calls PruneUnknownRecords.
//
// ExplainImagePull tells how MustAttemptImagePull answers, step by step,
// for tools (an operator's command, a demo). It is not a second
// implementation: the check and the explanation run the same decision
// function, which only reads and returns a verdict with the facts it looked
// at; the check then logs, counts and makes the write the verdict names,
// while the explanation is built from the verdict and writes nothing,
// reporting instead the secret the check would add to the record. The check
// allocates nothing for this.
//
// # Guarantees
//
//   - Decision order is the upstream kubelet's, step for step: an absent
//     image must be pulled; then "pulled by the kubelet" is a pulled record
//     for the imageRef, an in-flight pull of the image string in this
//     process, or a stored intent for it; the policy is asked before the
//     record's content; no record, no mapping entry for the image's
//     mapping key, or an entry without credentials mean "must pull"; a
//     node-wide entry means "no pull"; only then are the pod's credentials
//     fetched (lazily, once); a pod secret is accepted when its hash equals a
//     cached non-empty hash, or when its UID, namespace and name equal a
//     cached secret's while the entry has fewer than 100 secrets (a rotated
//     secret is trusted), and the accepted secret is added to the entry
//     under the same limit; finally a pod service account equal to a cached
//     one on UID, namespace and name is accepted.
//   - Records are created and merged with the kubelet's rules (node-wide
//     access is sticky; secrets keyed by UID/namespace/name, newest hash
//     wins, sorted; service accounts unioned and sorted; the first entry is
//     stored as given; LastUpdatedTime moves only on change; nil credentials
//     create a record with an empty mapping but never change an existing
//     one). Intents are counted per raw image string; an intent is kept when
//     its pulled record cannot be written.
//   - Fail safe: any error reading records during a check means "must pull"
//     (true, nil, result "error"). Only an error from getPodCredentials is
//     returned. A record is never changed in place: records read from a
//     RecordPeeker are shared with the store's cache and are copied before
//     any merge.
//   - ExplainImagePull gives the answer, error and credential lookups
//     MustAttemptImagePull would give at the same moment, and never writes;
//     an explanation never holds a credential hash. NewImagePullManager with
//     a nil ImageLister writes nothing, so a manager over a read-only store
//     can explain.
//   - Mapping keys are the kubelet's (v1.37): the pod's image string with
//     only its tag and digest cut, never normalised (MappingKey), so
//     "busybox:1.36" is keyed "busybox" and "library/busybox:1" is keyed
//     "library/busybox". Records written here read the same in a stock
//     kubelet and the other way round, spelling for spelling.
//   - Policies and allowlist behave as the kubelet's: allowlist patterns are
//     not normalised and are matched against the image's mapping key (the
//     raw string when it does not parse), exactly, then by "/*" prefix.
//
// # Deliberate differences from the kubelet
//
//   - Writes a check makes (adding an accepted pod secret to a record) run
//     under the record's lock on a fresh read of the record, and the
//     100-secret limit is checked again on that read. Upstream decides to
//     write on the copy it read before dropping its locks, so a write can
//     pass the limit when another pull added secrets in between.
//   - Lock stripes are picked with hash % len(stripes) and any stripe count
//     is accepted (kubernetes#138935: a count above 31 panicked).
//   - Opt-in, off by default: WithNormalizedImageNames keys mappings by the
//     fully qualified repository name ("busybox", "library/busybox:1" and
//     "docker.io/library/busybox@sha256:…" share "docker.io/library/busybox")
//     and normalises both sides of start-up recovery, so the intent "busybox"
//     matches the runtime's "docker.io/library/busybox:latest" instead of
//     staying for ever. WithNormalizedAllowlist does the same for allowlist
//     matching (kubernetes#137629). The security argument: every spelling of
//     one normalised name names the same repository on the same registry, so
//     a pull with any of them asks the registry for the same credentials;
//     sharing an entry grants nothing a pull would refuse. The cost is
//     compatibility: a stock kubelet looks short names up under other keys,
//     so after switching a node in either direction pods using short names
//     re-pull (IfNotPresent) or fail with ErrImageNeverPull (Never) until
//     their records are rewritten. Use them only where no stock kubelet
//     shares the directory.
//   - PruneUnknownRecords lists without a lock, then deletes record by record
//     under each record's own lock after re-reading it (a record refreshed
//     meanwhile is kept). Upstream holds every record lock for the whole
//     prune, blocking all checks.
//   - PruneUnknownRecords never deletes the record of an image the runtime
//     holds. Upstream deletes every record older than the garbage
//     collection's start whose imageRef is not in the list the collector
//     passes, and that list is only the images it considered for eviction
//     and kept: images in use by a container and pinned ones are never in it,
//     nor are those after it freed enough; and an image removed by the
//     collection and pulled again with the same credentials before the hook
//     runs changes nothing on disk, so its record keeps its old time. Either
//     way the image is present with no record and no intent, looks
//     preloaded, and under NeverVerifyPreloadedImages every pod may use it,
//     whatever secret pulled it. Here the runtime is listed again (through
//     the manager's ImageLister) after the candidates are chosen, a failure
//     to list prunes nothing, and a record is kept if a pull of its imageRef
//     was recorded at or after until (remembered in memory per imageRef
//     until its record goes). The security argument: a record only ever
//     narrows who may use present content, so keeping one too many costs a
//     file, while deleting one too many hands a private image to every pod.
//     The cost: records of images that stay present outlive a collection,
//     which is what they are for; kubeletadapter's TestImageGCRepull shows
//     the difference against upstream's own code.
//   - LastUpdatedTime is set at whole-second precision, as stores keep it, so
//     pruning compares the same whether a record came from memory or disk.
//   - NewImagePullCredentialVerificationPolicy rejects an allowlist given
//     with a policy other than NeverVerifyAllowlistedImages (upstream checks
//     this in kubelet configuration validation, not in the constructor).
//   - A nil GetPodCredentials means the pod has no credentials (upstream
//     would call it and panic).
//   - The on-disk gauges are set at start-up as well, from the store's
//     accessor.RecordCounter (O(1)), never from a directory scan.
//   - WithPreloadedImageProtection (default off) fixes kubernetes#138175: a
//     pulled record for the imageRef whose mapping has entries for other
//     names but none for the requested image's mapping key does not
//     count as "pulled by the kubelet" (an intent for the image string
//     still does, and so does a record with no mapping at all). With the
//     protection on, a pull recorded without usable credentials (start-up
//     recovery of a leftover intent, nil credentials) adds an empty entry
//     for its own name, which means "pulled by the kubelet, re-verify"
//     (step 10), where the kubelet writes an empty mapping or nothing: so
//     the name keeps counting as pulled after the content gains other
//     names. So an image
//     preloaded as X stays usable under the NeverVerifyPreloadedImages policy
//     after someone pulls the same content as Y with a secret. The trade-off:
//     "preloaded" is then decided per name, not per content. If a runtime
//     resolves a name the kubelet never pulled to content it pulled under
//     another name (for example a digest reference resolved across
//     repositories, or a short-name alias), a pod using that name is treated
//     as using a preloaded image and is not asked for credentials, although
//     the only recorded credentials for that content were a secret's. Leave
//     it off on nodes whose runtime resolves references that way.
//   - WithCredentialExpiry (default off) bounds how long a credential
//     vouches. The kubelet trusts a recorded credential for as long as the
//     record lives, also after the registry revoked it (its documentation
//     suggests imagePullPolicy: Always instead). With a TTL, steps 12 and
//     13 accept a matching secret or service account only if a pull made
//     with it, of the imageRef under the mapping key, was recorded less
//     than the TTL ago; an expired match is skipped as if it had not
//     matched (another may still vouch), so the pod must pull, and its
//     successful pull renews the proof. The proofs are a credstamp.Store
//     in a directory of the caller's, outside image_manager: the records
//     are written exactly as without expiry, nothing is deleted when a
//     credential expires (a deleted record would make the image look
//     preloaded), and a stock kubelet on the same directory sees nothing
//     new. A rotated secret accepted by its coordinates inherits the proof
//     that vouched for it, never a newer one. A missing proof is an
//     expired one, so turning expiry on, losing the proofs or running a
//     stock kubelet meanwhile costs pulls, never access. Node-wide entries
//     do not expire.
//
// # Lock-free checks
//
// A check takes no lock. Upstream takes the record's lock and then the
// intent's lock only to read the record and the intent consistently, and
// drops them before deciding, so its answer can be stale as soon as it is
// made; what the locks buy is that a check never sees "no record and no
// intent" while a pull is being recorded (which would make a pulled image
// look preloaded). Writers here keep the upstream order (write the record,
// then drop the intent) and bump an atomic drop counter just before dropping
// an intent. A check loads the counter, reads the record and, only if there
// is none, the in-flight count and the stored intent. If it finds no intent
// and the counter moved, it reads the record again: any intent dropped after
// the first record read belonged to a pull whose record was written before
// the drop, so the second read sees it. If the counter did not move, no
// intent was dropped in between, and "no intent" was already true before
// the first read, which then saw every record written before it. So a check
// never misses both, exactly as under upstream's locks, and a miss costs one
// extra atomic load rather than a lock. The store must be safe for
// concurrent use (every PullRecordsAccessor is) and its records immutable
// once handed out; intents of other processes sharing the store are not
// covered (nor are they upstream, whose locks are per process). Intent
// counters are atomics in a sync.Map; mapping keys and allowlist results
// come from bounded, lock-free caches, so a check parses an image string at
// most once.
//
// # Non-guarantees
//
//   - Without WithCredentialExpiry, credentials once recorded are trusted
//     for ever; with it, for the TTL after their last recorded pull, so a
//     revocation at the registry goes unnoticed for up to the TTL. Records
//     are not cleaned when a secret or namespace is deleted (as upstream).
//   - The answer reflects the records at the time of the check; a record
//     changed during a check may or may not be seen.
//   - Intent counters live in process memory; after a restart only stored
//     intents mark in-flight pulls, as upstream.
//   - The 100-secret limit applies only to writes a check makes, not to
//     writes after pulls (as upstream).
//   - Metrics are only kept when WithMetrics is given; nothing is registered
//     globally.
package pullmanager
