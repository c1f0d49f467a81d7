// Package explain tells why the pull manager would answer MustAttemptImagePull
// the way it does, step by step, by reading the records without writing.
//
// It mirrors the numbered decision order of the kubelet's pull manager
// (KEP-2535): image presence, the record and intent lookup, the policy, the
// credential mapping, node-wide access, the lazy pod credential lookup, secret
// hash and coordinate matching, and the service account match.
//
// Guarantees:
//   - Explain never writes: it only calls the read methods of the store.
//   - Where the manager would write during a check (a new secret coordinate
//     with a known-good hash, or a rotated hash for known coordinates), the
//     explanation says so in WouldRecord instead of writing.
//   - A credential hash never appears in an explanation's text.
//
// Non-guarantees: Explain is a model of the decision, not the decision. The
// demo command checks at run time that both agree; a read-only explanation
// cannot see the manager's in-memory count of in-flight pulls unless the
// caller passes it with Options.InFlight.
package explain
