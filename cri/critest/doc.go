// Package critest is a test double for CRI clients: an in-memory CRI v1
// image service (k8s.io/cri-api runtime.v1 ImageService) served over real
// gRPC on a unix socket, for tests of code that dials a container runtime.
//
// It is not a runtime. It stores no layers, contacts no registry and unpacks
// nothing: an image is a record of ID, tags and digests, and a pull of any
// well-formed reference succeeds unless the test says otherwise
// (RequireAuth, Intercept).
//
// # Guarantees
//
//   - Names are canonicalised as the kubelet's runtimes report them, with
//     github.com/distribution/reference: "busybox" is stored and reported as
//     "docker.io/library/busybox:latest". ImageStatus, RemoveImage and a
//     ListImages filter resolve any form that canonicalises to a present
//     tag, a present repository digest ("name@sha256:..."), or an image ID
//     ("sha256:..."). PullImage takes references only: by tag it yields the
//     tag's image, by digest the image carrying that repository digest, or
//     else a new image known by the digest alone. An unparsable reference
//     is absent to ImageStatus and RemoveImage and an InvalidArgument error
//     to PullImage. RemoveImage removes the whole image, whatever name it
//     is given.
//   - IDs are deterministic: ImageID gives the ID a pull of a reference
//     yields, the same in every process, and distinct tags give distinct
//     IDs. An image pulled or added by tag carries the repository digest
//     name@Digest(tag), computed the same way. Size is a fixed, meaningless
//     number.
//   - PullImage answers with the image's ID, as containerd does, or after
//     AnswerPullsWithRepoDigest(true) with its repository digest, as CRI-O
//     does.
//   - ListImages answers in ID order. RemoveImage of an absent image
//     succeeds. ImageFsInfo answers with no filesystems, or those
//     SetImageFs gives. Every image's Size is the same fixed number.
//   - The RuntimeService answers Version (SetRuntimeVersion sets its
//     runtime name and version) and ListContainers (the containers
//     SetContainers gives, in that order, whatever the filter); its other
//     calls are Unimplemented.
//   - A pull that RequireAuth covers fails, without the right username and
//     password, with codes.Unknown and a message carrying "401
//     Unauthorized", as containerd and CRI-O report a registry's refusal.
//   - Every call is logged (Calls) before Intercept hooks run, and hooks run
//     before the fake looks at its images, so a hook that blocks or fails
//     leaves the images untouched.
//   - Servers (Listen, Start, ImageService.Serve) are real gRPC servers; a
//     server with no service registered is "a gRPC server that is not a CRI
//     image service".
//
// It does not implement the RuntimeService beyond Version and
// ListContainers (no container runs, no filter applies), pull progress, pinned images,
// sandbox-specific pulls (the sandbox config is ignored), or image specs'
// annotations and user-specified images.
//
// Package critest must not import github.com/pullrecords/pullrecords/cri,
// whose tests use it.
package critest
