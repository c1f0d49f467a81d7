// Package agent is the node agent of the cluster image cache: one per node
// (`pullrecords agent`, a DaemonSet), it reports what the node's container
// runtime has into the status of the node's NodeImages object and removes
// the images the object's spec.purge names.
//
// The controller creates each node's NodeImages (named after the node) and
// writes its spec and status.results; the agent writes status.agent and
// status.images. Each owns its fields through server-side apply, so neither
// overwrites the other.
//
// # Guarantees
//
//   - The agent watches only its own node's object (a field selector on
//     metadata.name), reads it from that watch, and writes only that object,
//     whatever its client may access. It never creates or deletes a
//     NodeImages: while its object is absent it waits, writing nothing.
//   - Every write is a server-side apply on the status subresource with
//     field manager FieldManager ("pullrecords-agent"), forced, holding
//     exactly status.agent (heartbeatTime, observedGeneration,
//     runtimeVersion, imageFsUsedBytes, imageFsTotalBytes) and status.images.
//     status.results, the spec and the metadata are never part of it, so
//     the controller's fields survive every agent write.
//   - Presence is the runtime's exact answer to CRI ImageStatus for the
//     reference as the spec spells it; there is no text search, so a
//     reference that is a prefix or a substring of a present one is absent.
//     status.images has one entry per distinct image of spec.images and
//     spec.purge, in that order, with the image ID as imageRef (for a
//     purge entry, the ID of a recorded image still present) and, for
//     spec.images, the runtime's size.
//   - Purges remove only what a cache pulled, by image ID, after checks
//     made on the node right before CRI RemoveImage. A spec.purge entry
//     names the images to remove through its pull records (imageRef, the
//     image the kubelet reported for the cache's own pre-pull); the agent
//     resolves each to the runtime's image and removes that image by ID
//     only when: no spec.images reference resolves to it (so another
//     cache keeps every spelling and every tag of the same content), the
//     runtime does not pin it (CRI Image.pinned, containerd's sandbox
//     image), no container in any state uses it (CRI ListContainers,
//     imageRef and image resolved to IDs, asked once per round before the
//     first removal), and it has no tag beyond the names of this round's
//     purge entries that resolve to it. Otherwise the entry's report says
//     why in kept ("another ImageCache keeps it", "pinned by the runtime",
//     "in use by a container", "it has other tags on the node (...)", "no
//     cache's pull of it is recorded" for an entry without a record; the
//     api.Kept* constants), with present true. "in use by a container" is
//     not final: the entry is checked again every round and the image
//     removed once no container uses it. An entry spec.images also names
//     is not touched (keeping wins).
//   - A purge entry is reported absent only when none of its recorded
//     images resolves any more. An entry whose records cannot be resolved
//     this round, or any entry while a spec.images image's status is
//     unknown, is left out of the report and nothing of it is removed. A
//     failed removal (or a failed container check) is reported in the
//     entry's removeError, retried every round, and cleared once the image
//     is gone or leaves spec.purge.
//   - observedGeneration is the metadata.generation of the object version
//     the report is based on: every image of that generation's spec was
//     checked (or left out, see below) before the write.
//   - Rounds run on every change of the object and every ResyncInterval.
//     A round writes when the report (heartbeat aside) differs from the
//     object's status, or when the last write is at least ResyncInterval
//     old; so the heartbeat is refreshed about every ResyncInterval and an
//     idle node causes no other writes, including on the agent's own
//     changes coming back through the watch.
//   - Failures never end Run. An image whose ImageStatus fails is left out
//     of status.images for that round and logged. A runtime that cannot be
//     reached (ImageFsInfo fails, or a call answers Unavailable) or a write
//     the API server refuses makes the round write nothing; it is logged and
//     retried with a backoff from 1s up to 30s (never beyond
//     ResyncInterval). A failing RuntimeVersion keeps the last version
//     known.
//   - The agent reads no Secrets and writes nothing on the node's
//     filesystem; it only statfs's the image filesystem to learn its size.
//   - Logging is klog contextual logging, from the logger in Run's context.
//   - Healthy (for /healthz) is nil only while Run runs and a round has
//     succeeded (written its report, or found nothing to write) within
//     HealthRounds resync intervals by the agent's clock. Config.Metrics
//     (optional) counts reports, failed rounds by stage and purge checks
//     by outcome, and shows the last report's time; neither changes what
//     the agent reports or removes.
//
// # Non-guarantees
//
//   - A stopped heartbeat is the only sign of an agent that is gone or of a
//     runtime it cannot reach; the controller must judge staleness from
//     heartbeatTime (which has one-second resolution).
//   - imageFsUsedBytes is the first image filesystem the runtime reports
//     (as the kubelet's imageFs); imageFsTotalBytes is the size of the
//     filesystem at ImageFsPath, or at the mountpoint the runtime reports,
//     as seen from the agent's own mount namespace: in a pod, mount the
//     host path and set ImageFsPath. It is left out when statfs fails.
//   - The checks and the removal are not atomic: a container created
//     between the container check and RemoveImage may lose its image (the
//     runtime may refuse, which is then a removeError). On a runtime that
//     does not report pinned images (containerd before 1.7), the sandbox
//     image is protected only by the other rules (a cache that found it
//     present never purges it).
//   - Presence can change between a round and the next; the report is a
//     snapshot, not a lock on the images.
//   - Entries another writer adds to status.images are neither removed nor
//     overwritten by the agent's apply unless they name an image the agent
//     reports.
package agent
