package containerdapi

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// MaxRead bounds one ReadAt: a larger buffer is ErrReadTooLarge.
const MaxRead = 4 << 20

// Content reads containerd's content store (the blobs, by digest) in one
// namespace. It implements imageruntime.Content and is safe for concurrent
// use.
type Content struct {
	c client
}

var _ imageruntime.Content = (*Content)(nil)

// NewContent returns a Content that calls containerd's content service on
// conn (a connection the caller dialled, for instance with cri.NewConn, and
// closes) in namespace; an empty namespace is DefaultNamespace.
func NewContent(conn *grpc.ClientConn, namespace string) *Content {
	return &Content{c: newClient(conn, namespace)}
}

// Size returns the size of blob dgst and true when the content store holds
// it (containerd's Info answers only for committed blobs, never for an
// ingest in progress); 0 and false when it answers NotFound. A runtime
// without the content service is ErrNotContainerd.
func (c *Content) Size(ctx context.Context, dgst string) (int64, bool, error) {
	if dgst == "" {
		return 0, false, fmt.Errorf("containerd content Info: %w: empty digest", ErrInvalidArgument)
	}
	resp, err := c.c.invoke(ctx, methodInfo, appendString(nil, fieldRequestDigestOrName, dgst))
	if err != nil {
		if isNotFound(err) {
			return 0, false, nil
		}
		return 0, false, callError("content Info", dgst, err)
	}
	info, found, err := embedded(resp, fieldResponseObject)
	if err == nil && !found {
		err = fmt.Errorf("%w: no info in the answer", ErrBadResponse)
	}
	var size int64
	var got string
	if err == nil {
		err = eachField(info, func(f field) error {
			var err error
			switch f.num {
			case fieldInfoDigest:
				got, err = f.stringField()
			case fieldInfoSize:
				size, err = f.int64Field()
			}
			return err
		})
	}
	if err == nil && got != dgst {
		err = fmt.Errorf("%w: info for %q", ErrBadResponse, got)
	}
	if err == nil && size < 0 {
		err = fmt.Errorf("%w: negative size %d", ErrBadResponse, size)
	}
	if err != nil {
		return 0, false, fmt.Errorf("containerd content Info of %s: %w", dgst, err)
	}
	return size, true, nil
}

// ReadAt reads len(p) bytes of blob dgst from offset off into p, in one
// Read stream. It returns len(p) and nil, or fewer bytes and an error:
// ErrShortRead when the blob ends first (or off is past its end),
// ErrNotHeld when the store does not hold it, ErrReadTooLarge for
// len(p) > MaxRead, ErrBadResponse for chunks that are not contiguous or
// overrun p. An empty p reads nothing and calls nothing.
func (c *Content) ReadAt(ctx context.Context, dgst string, p []byte, off int64) (int, error) {
	switch {
	case dgst == "":
		return 0, fmt.Errorf("containerd content Read: %w: empty digest", ErrInvalidArgument)
	case off < 0:
		return 0, fmt.Errorf("containerd content Read of %s: %w: negative offset %d", dgst, ErrInvalidArgument, off)
	case len(p) > MaxRead:
		return 0, fmt.Errorf("containerd content Read of %s: %w: %d bytes asked, at most %d", dgst, ErrReadTooLarge, len(p), MaxRead)
	case len(p) == 0:
		// containerd reads the whole blob for size 0.
		return 0, nil
	}
	n, err := c.read(ctx, dgst, p, off)
	if err != nil {
		return n, fmt.Errorf("containerd content Read of %s at %d (+%d): %w", dgst, off, len(p), err)
	}
	return n, nil
}

func (c *Content) read(ctx context.Context, dgst string, p []byte, off int64) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when we stop reading early
	req := appendString(nil, fieldRequestDigestOrName, dgst)
	req = appendInt64(req, fieldReadOffset, off)
	req = appendInt64(req, fieldReadSize, int64(len(p)))
	stream, err := c.c.conn.NewStream(c.c.withNamespace(ctx), &grpc.StreamDesc{ServerStreams: true}, methodRead, callCodec)
	if err != nil {
		return 0, readCallError(err)
	}
	if err := stream.SendMsg(&rawMessage{b: req}); err != nil && !errors.Is(err, io.EOF) {
		return 0, readCallError(err)
	}
	if err := stream.CloseSend(); err != nil {
		return 0, readCallError(err)
	}
	// containerd numbers its chunks from the requested offset (the first
	// is 0); a server numbering them from the blob's start is accepted
	// too. The first chunk fixes which.
	base := int64(-1)
	n := 0
	for {
		var msg rawMessage
		err := stream.RecvMsg(&msg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, readCallError(err)
		}
		chunkOff, data, err := unmarshalChunk(msg.b)
		if err != nil {
			return n, err
		}
		if base < 0 {
			switch chunkOff {
			case 0:
				base = 0
			case off:
				base = off
			default:
				return n, fmt.Errorf("%w: first chunk at offset %d", ErrBadResponse, chunkOff)
			}
		}
		if chunkOff != base+int64(n) {
			return n, fmt.Errorf("%w: chunk at offset %d after %d bytes", ErrBadResponse, chunkOff, n)
		}
		if len(data) > len(p)-n {
			return n, fmt.Errorf("%w: %d bytes more than asked for", ErrBadResponse, len(data)-(len(p)-n))
		}
		n += copy(p[n:], data)
	}
	if n < len(p) {
		return n, fmt.Errorf("%w: %d of %d bytes", ErrShortRead, n, len(p))
	}
	return n, nil
}

// readCallError maps a Read stream's error: NotFound is ErrNotHeld,
// OutOfRange (an offset past the blob's end) ErrShortRead.
func readCallError(err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	case codes.OutOfRange:
		return fmt.Errorf("%w: %w", ErrShortRead, err)
	case codes.Unimplemented:
		return fmt.Errorf("%w: %w", ErrNotContainerd, err)
	}
	return err
}

func unmarshalChunk(b []byte) (int64, []byte, error) {
	var off int64
	var data []byte
	err := eachField(b, func(f field) error {
		switch f.num {
		case fieldChunkOffset:
			var err error
			off, err = f.int64Field()
			return err
		case fieldChunkData:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			data = f.val
		}
		return nil
	})
	return off, data, err
}
