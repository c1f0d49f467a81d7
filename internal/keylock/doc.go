// Package keylock serialises work per string key with a fixed set of
// mutexes ("stripes") picked by hashing the key.
//
// Guarantees: two calls with the same key always get the same stripe, so
// they never run at the same time; any stripe count from 1 up is valid, and
// the stripe index is always hash % number of stripes (the upstream kubelet's
// striped lock set panicked when its modulus and its slice length disagreed,
// kubernetes#138935). Stripes sit on their own cache lines.
//
// Non-guarantees: different keys may share a stripe and then wait for each
// other; there is no fairness beyond sync.Mutex's; keys are hashed with a
// per-Set random seed, so which keys share a stripe differs between runs.
package keylock
