// Command pullrecords inspects, explains and repairs the image pull records a
// kubelet (or a runtime shim using this module) keeps under
// <kubelet dir>/image_manager, and plays a self-contained demonstration of
// the pull manager.
//
// Guarantees:
//   - Every command is read-only unless its help says it writes: ls, get,
//     explain, fsck (without --repair), migrate (without --apply), cache status
//     and prune --dry-run open the store read-only and take no lock, so they
//     work while another process (a kubelet built on this library) holds it.
//   - fsck --repair, migrate --apply and prune refuse (exit 2, one line
//     naming the holder) while another process holds the records' lock, and
//     while a kubelet is detected (a process named kubelet, or its healthz
//     endpoint answering) unless --kubelet-stopped is given.
//   - cache run is a standalone image cache: it pulls anonymously only and
//     writes nothing under image_manager; cache apply and cache run refuse
//     a cache with a pull secret. cache apply and cache delete change the
//     declared caches as a whole file or not at all, and a running cache run
//     picks the change up without a restart.
//   - Control characters in strings from records, files or the runtime are
//     escaped in table output and error lines; JSON and YAML are exact.
//   - Exit status 0 means success, 1 means the command ran and found problems
//     (fsck) or what was asked for does not exist (get, as kubectl's
//     NotFound), 2 means it could not run (bad flag, missing directory,
//     permission denied, unreachable or non-CRI socket). A "must pull"
//     decision is an answer, not an error: explain exits 0.
//   - Errors are one line on stderr prefixed "pullrecords: "; no stack traces
//     and no usage dump on runtime errors.
//   - Credential hashes are shortened in tables and never logged; -o wide,
//     -o json and -o yaml print them in full, since explain --secret takes
//     only a full hash.
//
// Non-guarantees: the table output format is for people and may change; use
// -o json or -o yaml in scripts. The running-kubelet check is a safety net:
// a kubelet in another PID namespace with its healthz endpoint moved or
// disabled is not detected.
package main
