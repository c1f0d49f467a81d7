// Package crishim is the CRI-facing layer of a runtime shim: it admits a
// container runtime's PullImage only after the image's origin registry
// (never a mirror) accepted the request's credential for that reference.
//
// Why: a registry mirror or peer-to-peer cache (Spegel, k3s's embedded
// mirror, pull-through caches) serves a private image to the runtime
// without the pod's credential, so the kubelet's verification pull
// (KEP-2535) proves nothing on such a node. The gate asks the origin
// itself, through a Verifier, and remembers each acceptance for a TTL in a
// credstamp.Store.
//
// RequestFromCRI turns a runtimeapi.PullImageRequest into a Request (image,
// credential, pod). Gate.Pull runs the gate around one pull: Admit decides
// before the pull, the runtime pulls, the gate checks that what the runtime
// holds is what the origin proved (Config.Runtime), takes back the names of
// a pull it refuses afterwards, and records the pull (PullSucceeded). The
// gRPC proxy (cri/criproxy) and the command (pullrecords shim) sit around
// it; this package imports the CRI types but not gRPC.
//
// # Guarantees
//
//   - A pull is admitted only if (a) its registry is configured mirror-only,
//     or (b) the Verifier accepted this very credential for this image (by
//     string) just now (with originverify: the registry proved it holds the
//     content, not only said yes), or (c) a stamp of (credential, repository, digest)
//     younger than the TTL exists, the digest coming from a digest reference
//     or the runtime's own copy (Config.Local). A stamp for another
//     repository, another digest, another credential or no credential
//     admits nothing; an expired stamp, or one dated in the future, makes
//     the gate ask again.
//   - The credential checked is the one the runtime would use: the
//     request's, else the node's for the image's registry (Docker config
//     JSON; Docker Hub's names are one registry), else none. Stamps key the
//     pod's credential by its hash, the node's by "node:"+hash, none by
//     "anonymous", so the three never vouch for each other.
//   - A refusal is never remembered: the next request asks the origin
//     again. Concurrent identical requests (same credential, same image
//     string) share one origin request and all get its answer, refusal
//     included; each waits only as long as its own context allows, and when
//     the last waiter leaves the origin request is cancelled.
//   - An accepted verification is recorded in the shim's pull records
//     (Config.Records) under repository@digest, and PullSucceeded records
//     the runtime's imageRef: with the pod's credential as the secret
//     "cri-pull-auth" of the pod's namespace and UID with the credential's
//     hash, or as node-wide access for the node's credential or none.
//   - A refusal's error (*RefusalError) names the image, the registry, the
//     pod and the reason and wraps ErrRefused and the verifier's error
//     (errors.Is works on both). Neither errors nor logs hold a password,
//     token or credential hash.
//   - Through Pull with Config.Runtime, a pull the runtime made counts only
//     if the image its name now points to is the one pulled and is held
//     under a digest of the image's repository that the origin proved for
//     this credential (the admission's digest, or a fresh stamp). Otherwise
//     (a tag that moved, a registry or mirror that served the runtime other
//     content than it proved, a runtime that cannot say) the pull is refused
//     after the fact (ErrUnverifiedContent), nothing is recorded, and the
//     names the pull created are removed through Runtime.RemoveName: the
//     requested name unless it pointed to that image before, and each
//     repository@digest name of the image's repository that no verified
//     pull recorded; then the image if no name is left. Names of other
//     repositories (another tenant's) and content other names use are
//     never removed. A name whose earlier state is unknown is kept.
//   - A mirror-only pull through Pull is refused after the fact
//     (ErrPrivateContent), with the same undo, when the records (Config.Store)
//     hold its image ID or any of its repository digests from a pull made
//     with a pod's credential and from no pull open to every pod: a
//     mirror-only name never gets another tenant's private content.
//   - One log line per decision (pod, image, registry, credential kind,
//     result); remembered and mirror-only admissions at V(2).
//   - A remembered admission allocates nothing: parsed images and credential
//     hashes are memoised (bounded, 4096 entries each, then started over).
//     The memos only save work; a miss computes the same value, so they
//     cannot change a decision.
//
// # Non-guarantees
//
//   - The Verifier is trusted: the gate does not itself check that a
//     credential's ServerAddress names the image's registry
//     (originverify's Verifier refuses that).
//   - A stamp proves the credential was accepted within the TTL; a revoked
//     credential keeps working for at most that long.
//   - A tag reference without Config.Local is checked at the origin on
//     every pull (only the digest, which a tag does not carry, can be
//     remembered). With Local, the stamp is for the digest the runtime
//     holds, which may differ from what the tag names at the origin now.
//   - Mirror-only registries are checked only against the records: content
//     their mirrors serve that no credentialed pull through this gate
//     brought (private content of another node, or pulled before the gate
//     was installed) is open to every pod on the node. Use them only for
//     public content.
//   - Admit alone (without Pull) does not check what the runtime pulled.
//     Pull checks it through the runtime's word (ImageStatus after the
//     pull): a runtime that lies about its own images is trusted. Between
//     the pull and the removal of a refused pull's names another pod could
//     start the image under that name; the kubelet's own records (no
//     record of a successful pull) then decide for it.
//   - Pull removes names, not content: a refused pull of content the node
//     did not hold before leaves it to the runtime's garbage collection once
//     no name points to it; content that another name uses stays.
package crishim
