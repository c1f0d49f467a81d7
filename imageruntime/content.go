package imageruntime

import "context"

// Content is read access to the blobs a container runtime already holds
// (containerd's content store), addressed by digest ("sha256:<hex>"). A
// verification reads it to challenge a registry on the bytes the runtime
// would skip fetching because it has them.
//
// Implementations must be safe for concurrent use and must never answer
// ok=true for a blob they do not hold whole.
type Content interface {
	// Size returns the size of blob dgst and true when the runtime holds
	// it whole; 0 and false when it does not. An error means the store
	// could not be asked: callers must treat the blob as held (the safe
	// side for a verification) or give up.
	Size(ctx context.Context, dgst string) (size int64, ok bool, err error)
	// ReadAt reads len(p) bytes of blob dgst starting at off into p. A
	// read shorter than len(p) returns an error.
	ReadAt(ctx context.Context, dgst string, p []byte, off int64) (n int, err error)
}
