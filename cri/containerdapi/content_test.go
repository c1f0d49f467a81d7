package containerdapi

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testBlob is 5 MiB and 3 bytes of seeded random bytes: six 1 MiB chunks
// for a whole read, four for a MaxRead one.
func testBlob() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 5<<20+3)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

const absentDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

func TestContentSize(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	blob := testBlob()
	dgst := f.addBlob(DefaultNamespace, blob)
	small := f.addBlob(DefaultNamespace, []byte("x"))
	conn := f.serve(t)

	tests := []struct {
		name      string
		namespace string
		dgst      string
		wantSize  int64
		wantOK    bool
		wantErr   error
		wantCode  codes.Code
	}{
		{name: "held", namespace: DefaultNamespace, dgst: dgst, wantSize: int64(len(blob)), wantOK: true},
		{name: "held, one byte", namespace: DefaultNamespace, dgst: small, wantSize: 1, wantOK: true},
		{name: "empty namespace is k8s.io", namespace: "", dgst: dgst, wantSize: int64(len(blob)), wantOK: true},
		{name: "absent", namespace: DefaultNamespace, dgst: absentDigest},
		{name: "held in another namespace only", namespace: "moby", dgst: dgst},
		{name: "malformed digest", namespace: DefaultNamespace, dgst: "sha256:nothex", wantCode: codes.InvalidArgument},
		{name: "empty digest", namespace: DefaultNamespace, dgst: "", wantErr: ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size, ok, err := NewContent(conn, tc.namespace).Size(ctx, tc.dgst)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Size = %d, %v, %v; want %v", size, ok, err, tc.wantErr)
				}
			case tc.wantCode != codes.OK:
				if status.Code(errors.Unwrap(err)) != tc.wantCode || !strings.Contains(err.Error(), "content Info of "+tc.dgst) {
					t.Fatalf("Size = %d, %v, %v; want code %v naming the method and digest", size, ok, err, tc.wantCode)
				}
			case err != nil:
				t.Fatalf("Size: %v", err)
			}
			if size != tc.wantSize || ok != tc.wantOK {
				t.Errorf("Size = %d, %v; want %d, %v", size, ok, tc.wantSize, tc.wantOK)
			}
		})
	}
}

func TestContentReadAt(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	blob := testBlob()
	dgst := f.addBlob(DefaultNamespace, blob)
	end := int64(len(blob))
	c := NewContent(f.serve(t), DefaultNamespace)

	tests := []struct {
		name    string
		dgst    string
		off     int64
		len     int
		wantN   int
		wantErr error
	}{
		{name: "start", dgst: dgst, off: 0, len: 16, wantN: 16},
		{name: "across a chunk boundary", dgst: dgst, off: fakeChunk - 5, len: 10, wantN: 10},
		{name: "MaxRead across four chunks", dgst: dgst, off: 12345, len: MaxRead, wantN: MaxRead},
		{name: "last bytes", dgst: dgst, off: end - 7, len: 7, wantN: 7},
		{name: "one byte", dgst: dgst, off: 3 << 20, len: 1, wantN: 1},
		{name: "empty buffer reads nothing", dgst: dgst, off: 9, len: 0, wantN: 0},
		{name: "past the end: short", dgst: dgst, off: end - 5, len: 10, wantN: 5, wantErr: ErrShortRead},
		{name: "at the end: short", dgst: dgst, off: end, len: 1, wantN: 0, wantErr: ErrShortRead},
		{name: "beyond the end: out of range", dgst: dgst, off: end + 1, len: 1, wantN: 0, wantErr: ErrShortRead},
		{name: "absent", dgst: absentDigest, off: 0, len: 1, wantErr: ErrNotHeld},
		{name: "above the bound", dgst: dgst, off: 0, len: MaxRead + 1, wantErr: ErrReadTooLarge},
		{name: "negative offset", dgst: dgst, off: -1, len: 1, wantErr: ErrInvalidArgument},
		{name: "empty digest", dgst: "", off: 0, len: 1, wantErr: ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.len)
			n, err := c.ReadAt(ctx, tc.dgst, p, tc.off)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ReadAt(%d, +%d) = %d, %v; want %v", tc.off, tc.len, n, err, tc.wantErr)
			}
			if err != nil && tc.dgst != "" && !strings.Contains(err.Error(), "content Read of "+tc.dgst) {
				t.Errorf("error %q does not name the method and the digest", err)
			}
			if n != tc.wantN {
				t.Fatalf("ReadAt(%d, +%d) read %d bytes, want %d", tc.off, tc.len, n, tc.wantN)
			}
			if n > 0 && !bytes.Equal(p[:n], blob[tc.off:tc.off+int64(n)]) {
				t.Errorf("ReadAt(%d, +%d): bytes differ from the blob's", tc.off, tc.len)
			}
		})
	}
}

// TestContentReadAtBadStream serves Read streams that containerd never
// sends; each must be refused, never copied into p as if good.
func TestContentReadAtBadStream(t *testing.T) {
	type chunk struct {
		off  int64
		data string
	}
	tests := []struct {
		name   string
		off    int64
		len    int
		chunks []chunk
		want   error
	}{
		{name: "gap", len: 6, chunks: []chunk{{0, "abc"}, {4, "def"}}, want: ErrBadResponse},
		{name: "overlap", len: 6, chunks: []chunk{{0, "abc"}, {2, "def"}}, want: ErrBadResponse},
		{name: "more than asked", len: 4, chunks: []chunk{{0, "abc"}, {3, "def"}}, want: ErrBadResponse},
		{name: "first chunk elsewhere", off: 10, len: 3, chunks: []chunk{{5, "abc"}}, want: ErrBadResponse},
		{name: "nothing sent", len: 3, want: ErrShortRead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
				var req rawMessage
				if err := stream.RecvMsg(&req); err != nil {
					return err
				}
				for _, c := range tc.chunks {
					b := appendInt64(nil, fieldChunkOffset, c.off)
					b = appendString(b, fieldChunkData, c.data)
					if err := stream.SendMsg(&rawMessage{b: b}); err != nil {
						return err
					}
				}
				return nil
			}))
			c := NewContent(serveOn(t, srv), DefaultNamespace)
			n, err := c.ReadAt(context.Background(), absentDigest, make([]byte, tc.len), tc.off)
			if !errors.Is(err, tc.want) {
				t.Errorf("ReadAt = %d, %v; want %v", n, err, tc.want)
			}
		})
	}
}

// TestContentReadAtAbsoluteOffsets accepts a server numbering its chunks
// from the blob's start rather than from the requested offset.
func TestContentReadAtAbsoluteOffsets(t *testing.T) {
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var req rawMessage
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		for _, c := range []struct {
			off  int64
			data string
		}{{100, "ab"}, {102, "cd"}} {
			b := appendInt64(nil, fieldChunkOffset, c.off)
			if err := stream.SendMsg(&rawMessage{b: appendString(b, fieldChunkData, c.data)}); err != nil {
				return err
			}
		}
		return nil
	}))
	p := make([]byte, 4)
	n, err := NewContent(serveOn(t, srv), DefaultNamespace).ReadAt(context.Background(), absentDigest, p, 100)
	if err != nil || n != 4 {
		t.Fatalf("ReadAt = %d, %v; want 4, nil", n, err)
	}
	if diff := cmp.Diff("abcd", string(p)); diff != "" {
		t.Errorf("ReadAt bytes (-want +got):\n%s", diff)
	}
}

// TestFakeRequiresNamespace checks the fake as containerd answers a call
// without containerd-namespace: FailedPrecondition.
func TestFakeRequiresNamespace(t *testing.T) {
	f := newFake()
	dgst := f.addBlob(DefaultNamespace, []byte("x"))
	conn := f.serve(t)
	var resp rawMessage
	err := conn.Invoke(context.Background(), methodInfo, &rawMessage{b: appendString(nil, fieldRequestDigestOrName, dgst)}, &resp, callCodec)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "namespace is required") {
		t.Fatalf("Info without a namespace = %v; want FailedPrecondition, namespace is required", err)
	}
	if _, ok, err := NewContent(conn, DefaultNamespace).Size(context.Background(), dgst); err != nil || !ok {
		t.Fatalf("Size with the namespace = %v, %v; want held", ok, err)
	}
}

// TestNotContainerd calls a gRPC server without containerd's services (as
// CRI-O is): every method is ErrNotContainerd.
func TestNotContainerd(t *testing.T) {
	ctx := context.Background()
	conn := serveOn(t, grpc.NewServer())
	c, im := NewContent(conn, ""), NewImages(conn, "")
	_, _, sizeErr := c.Size(ctx, absentDigest)
	_, readErr := c.ReadAt(ctx, absentDigest, make([]byte, 1), 0)
	_, _, targetErr := im.Target(ctx, "example.com/a:1")
	removeErr := im.RemoveName(ctx, "example.com/a:1", absentDigest)
	for name, err := range map[string]error{"Size": sizeErr, "ReadAt": readErr, "Target": targetErr, "RemoveName": removeErr} {
		if !errors.Is(err, ErrNotContainerd) {
			t.Errorf("%s = %v; want ErrNotContainerd", name, err)
		}
	}
}
