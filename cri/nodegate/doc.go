// Package nodegate opens crishim's gate for one node, over its container
// runtime's socket: the gate's own pull records and verifications in a
// state directory, originverify's proof of possession reading the node's
// own bytes from containerd's content store, and the runtime as the gate
// sees it after a pull (what a name points to; how to take back one name a
// refused pull created).
//
// Both users of the gate open it here: "pullrecords shim", in front of the
// runtime, and the kubelet fork (kubeletadapter's GateImageService), inside
// the kubelet, so the two run the same decision with the same settings.
//
// # Guarantees
//
//   - Open refuses a configuration it cannot honour (no state directory, a
//     TTL or blob cap that is not positive, a runtime that cannot be asked)
//     with an error; it never opens a gate that verifies less than asked.
//   - The gate's records and verifications live in the state directory
//     only: never the kubelet's image_manager.
//   - RemoveName removes a name only through containerd's images service
//     (cri/containerdapi), and only while the name points to the image the
//     refused pull made: a name that moved is left alone (ErrNameMoved), a
//     name already gone is not an error. The CRI's RemoveImage is never used
//     for a name: it removes every name of an image.
//   - RemoveUnnamed removes an image through the CRI only when no tag and no
//     digest name points to it any more (what is left is containerd's
//     "sha256:<id>" name), so a refused pull leaves no unnamed image behind
//     and never removes an image somebody can still name.
//   - Close stops the pruning of old verifications and closes the stores,
//     in that order.
//
// # Non-guarantees
//
//   - A runtime that is not containerd (CRI-O) has no content store to
//     read: proofs then fetch every blob whole (capped), and RemoveName
//     always fails (ErrCannotRemoveName), so a refused pull's name stays;
//     the gate says so in its refusal.
//   - Between the ImageStatus check and the removal another pull may point
//     the name elsewhere; containerd is asked to remove the name only while
//     it points to the target read a moment before, which narrows the
//     window to containerd's own handling of that request.
package nodegate
