// Package explain is the pullrecords command's view of the pull manager's
// explanation of MustAttemptImagePull: it builds a manager over a store
// (possibly read-only) with the policy and options from flags, asks
// pullmanager's ExplainImagePull, and prints the manager's explanation itself
// (its JSON form is the command's), adding only what it knows about pod
// secrets given without their hash. It also parses the credential flags and
// redacts credential hashes for display.
//
// Guarantees:
//   - The decision is the manager's own: this package holds no decision
//     logic, so an explanation cannot drift from the check.
//   - Explain never writes: the manager is built without an image lister
//     (no start-up recovery), and ExplainImagePull tells what the check's
//     decision found instead of acting on it; where a check would update a
//     record, WouldRecord says so.
//   - A credential hash never appears in an explanation.
//
// Non-guarantees: a manager built here has no in-flight pulls, so a pull in
// progress in a running kubelet is seen only through its stored intent.
package explain
