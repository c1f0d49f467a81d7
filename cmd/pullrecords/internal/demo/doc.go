// Package demo plays a multi-tenant node against the real record store, the
// write-through cache and the real pull manager, with an in-process fake
// container runtime and registry, and reports every decision with the rule
// that made it.
//
// Guarantees:
//   - It needs no root, no socket and no network; it writes only below the
//     kubelet directory it is given.
//   - It is deterministic: record times come from a fake clock and image IDs
//     are hashes of fixed strings; only paths and the elapsed time vary.
//   - Every decision is made by the real manager's check and explained by
//     the manager's ExplainImagePull (the same decision code, run without
//     writing) just before; Run fails with ErrDisagree if the explanation
//     and the check ever differ on the answer, on whether the pod's
//     credentials are looked up, or on whether the record is written.
//
// Non-guarantees: the fake registry's authorisation is a toy (a repository
// accepts a fixed set of credential hashes and service accounts); the fake
// runtime does not model layers, disk use or pull progress.
package demo
