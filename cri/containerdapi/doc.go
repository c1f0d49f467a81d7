// Package containerdapi reads containerd's content store and reads and
// removes its image names, over the socket containerd serves the CRI on
// (/run/containerd/containerd.sock), in one containerd namespace (the CRI
// plugin's is DefaultNamespace, "k8s.io").
//
// A verification challenges a registry on the bytes the node already
// holds: Content (an imageruntime.Content) gives their size and byte
// ranges. After a refused pull the shim takes back the name the pull
// created: Images.RemoveName removes one name, never content and never
// another name. The CRI's RemoveImage cannot do that, since it removes
// every name of an image, another tenant's included.
//
// The package speaks containerd's gRPC services
// (containerd.services.content.v1.Content Info and Read,
// containerd.services.images.v1.Images Get and Delete) with messages
// encoded by hand (protowire, through a raw codec installed per call), so
// that its module does not depend on containerd's api module. The field
// numbers are those of containerd's .proto files, the same in containerd
// 1.6 and 2.x.
//
// # Guarantees
//
//   - Every call carries the gRPC metadata containerd-namespace (an empty
//     namespace given to NewContent or NewImages is DefaultNamespace);
//     nothing is read or removed in another namespace.
//   - Content.Size answers ok=true only for a blob containerd's Info knows,
//     which is a committed blob, never an ingest in progress; NotFound is
//     0, false, nil.
//   - Content.ReadAt returns exactly len(p) bytes or an error: one Read
//     stream, its chunks checked to be contiguous (containerd numbers them
//     from the requested offset; numbering from the blob's start is
//     accepted too) and never more than asked for (ErrBadResponse). A blob
//     that ends first is ErrShortRead, an absent one ErrNotHeld. A buffer
//     above MaxRead (4 MiB) is ErrReadTooLarge, before any call.
//   - Images.Target and Images.RemoveName answer for the exact name
//     (containerd's image name, a full reference); absent is ok=false,
//     or nil for RemoveName.
//   - Images.RemoveName deletes the name only if it points to the given
//     manifest digest, read just before the delete: a name pointing
//     elsewhere is ErrNameMoved and untouched. The delete carries the
//     target as containerd 2.x's guard, so on 2.x a name re-pointed after
//     the read is not deleted either (ErrNameMoved).
//   - A runtime that does not serve these services (gRPC Unimplemented,
//     for instance CRI-O) is ErrNotContainerd, for every method.
//   - Errors name the method and the digest or name; nothing the package
//     handles is secret.
//
// # Non-guarantees
//
//   - On containerd 1.6, which ignores Delete's target, a name re-pointed
//     between RemoveName's read and its delete is deleted.
//   - Removing a name removes no content, but containerd's garbage
//     collector later removes content that no other name, lease or
//     snapshot references, as after any image removal (the delete is not
//     sync, so that collection happens in the background).
//   - containerd's CRI plugin keeps its own cache of images and updates it
//     from containerd's image events, so a name deleted here leaves the
//     CRI's answers only once the plugin has handled the event. On
//     containerd 1.6.20 (e2e TestContainerdAPI) the CRI's ImageStatus of
//     the removed name found no image at the first poll, under 1 ms after
//     RemoveName returned, and the image's RepoTags and RepoDigests no
//     longer listed it; this is observed, not promised by containerd.
//   - A CRI pull creates several containerd names: the reference pulled,
//     the repository-digest name ("host/repo@sha256:...") and the image ID
//     ("sha256:<config digest>"). RemoveName removes the one name it is
//     given; a caller taking back a pull removes each name the pull
//     created and no name that was there before.
//   - The package dials nothing and closes nothing: the caller owns the
//     connection (cri.NewConn gives one to a unix socket).
//   - No Windows named pipes, no ttrpc.
package containerdapi
