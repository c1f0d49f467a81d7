package containerdapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// fakeChunk is the size of the fake's Read chunks: containerd 1.6 and 2.x
// copy through a 1 MiB pooled buffer.
const fakeChunk = 1 << 20

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// fakeContainerd serves containerd's Content/Info, Content/Read,
// Images/Get and Images/Delete with the hand codec, answering as
// containerd's services do: FailedPrecondition without a namespace,
// InvalidArgument for a malformed digest, NotFound for an unknown digest
// or name (or an unknown namespace), OutOfRange for a read offset past the
// end, Read chunks of at most 1 MiB numbered from the requested offset,
// and (unless v16) 2.x's Delete target guard. Everything else is
// Unimplemented.
type fakeContainerd struct {
	// v16 makes Delete ignore its target, as containerd 1.6 does.
	v16 bool
	// beforeDelete, when set, runs inside Delete before the name is
	// looked up (to move a name between RemoveName's Get and Delete).
	beforeDelete func(f *fakeContainerd)

	mu      sync.Mutex
	blobs   map[string]map[string][]byte     // namespace -> digest -> bytes
	images  map[string]map[string]descriptor // namespace -> name -> target
	deletes int
}

func newFake() *fakeContainerd {
	return &fakeContainerd{blobs: map[string]map[string][]byte{}, images: map[string]map[string]descriptor{}}
}

// addBlob stores data in namespace ns and returns its digest.
func (f *fakeContainerd) addBlob(ns string, data []byte) string {
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.blobs[ns] == nil {
		f.blobs[ns] = map[string][]byte{}
	}
	f.blobs[ns][d] = data
	return d
}

// setImage points name to target in namespace ns.
func (f *fakeContainerd) setImage(ns, name, target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setImageLocked(ns, name, target)
}

func (f *fakeContainerd) setImageLocked(ns, name, target string) {
	if f.images[ns] == nil {
		f.images[ns] = map[string]descriptor{}
	}
	f.images[ns][name] = descriptor{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: target, Size: 512}
}

func (f *fakeContainerd) image(ns, name string) (descriptor, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.images[ns][name]
	return d, ok
}

// serve starts the fake on a unix socket in a temporary directory and
// returns a client connection to it.
func (f *fakeContainerd) serve(t *testing.T) *grpc.ClientConn {
	t.Helper()
	return serveOn(t, grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(f.handle)))
}

// serveOn serves srv on a unix socket and dials it.
func serveOn(t *testing.T, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func (f *fakeContainerd) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var handler func(ns string, req []byte, stream grpc.ServerStream) error
	switch method {
	case methodInfo:
		handler = f.info
	case methodRead:
		handler = f.read
	case methodGet:
		handler = f.get
	case methodDelete:
		handler = f.delete
	default:
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	var req rawMessage
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	ns := md.Get(namespaceKey)
	if len(ns) == 0 || ns[0] == "" {
		return status.Error(codes.FailedPrecondition, "namespace is required: failed precondition")
	}
	return handler(ns[0], req.b, stream)
}

// fakeRequest decodes the request fields the fake reads.
type fakeRequest struct {
	key          string // digest or name
	offset, size int64
	target       *descriptor
}

// decodeRequest decodes field 1 of any request, and fields 2 and 3 of a
// ReadContentRequest when read is set (in DeleteImageRequest they are sync
// and target).
func decodeRequest(b []byte, read bool) (fakeRequest, error) {
	var r fakeRequest
	err := eachField(b, func(fl field) error {
		var err error
		switch {
		case fl.num == fieldRequestDigestOrName:
			r.key, err = fl.stringField()
		case read && fl.num == fieldReadOffset:
			r.offset, err = fl.int64Field()
		case read && fl.num == fieldReadSize:
			r.size, err = fl.int64Field()
		}
		return err
	})
	if err != nil {
		return r, status.Error(codes.InvalidArgument, err.Error())
	}
	return r, nil
}

func (f *fakeContainerd) blob(ns string, b []byte) (fakeRequest, []byte, error) {
	r, err := decodeRequest(b, true)
	if err != nil {
		return r, nil, err
	}
	if !digestRE.MatchString(r.key) {
		return r, nil, status.Errorf(codes.InvalidArgument, "%q: invalid checksum digest format", r.key)
	}
	f.mu.Lock()
	data, ok := f.blobs[ns][r.key]
	f.mu.Unlock()
	if !ok {
		return r, nil, status.Errorf(codes.NotFound, "content digest %s: not found", r.key)
	}
	return r, data, nil
}

func (f *fakeContainerd) info(ns string, b []byte, stream grpc.ServerStream) error {
	r, data, err := f.blob(ns, b)
	if err != nil {
		return err
	}
	info := appendString(nil, fieldInfoDigest, r.key)
	info = appendInt64(info, fieldInfoSize, int64(len(data)))
	return stream.SendMsg(&rawMessage{b: appendMessage(nil, fieldResponseObject, info)})
}

func (f *fakeContainerd) read(ns string, b []byte, stream grpc.ServerStream) error {
	r, data, err := f.blob(ns, b)
	if err != nil {
		return err
	}
	off, size, total := r.offset, r.size, int64(len(data))
	if off < 0 {
		off = 0
	}
	if off > total {
		return status.Errorf(codes.OutOfRange, "read past object length %v bytes", total)
	}
	if size <= 0 || off+size > total {
		size = total - off
	}
	section := data[off : off+size]
	for sent := 0; sent < len(section); {
		end := min(sent+fakeChunk, len(section))
		chunk := appendInt64(nil, fieldChunkOffset, int64(sent))
		chunk = protowire.AppendTag(chunk, fieldChunkData, protowire.BytesType)
		chunk = protowire.AppendBytes(chunk, section[sent:end])
		if err := stream.SendMsg(&rawMessage{b: chunk}); err != nil {
			return err
		}
		sent = end
	}
	return nil
}

func (f *fakeContainerd) get(ns string, b []byte, stream grpc.ServerStream) error {
	r, err := decodeRequest(b, false)
	if err != nil {
		return err
	}
	d, ok := f.image(ns, r.key)
	if !ok {
		return status.Errorf(codes.NotFound, "image %q: not found", r.key)
	}
	im := image{Name: r.key, Target: d}
	return stream.SendMsg(&rawMessage{b: appendMessage(nil, fieldResponseObject, im.marshal())})
}

func (f *fakeContainerd) delete(ns string, b []byte, stream grpc.ServerStream) error {
	r, err := decodeRequest(b, false)
	if err != nil {
		return err
	}
	if target, ok, err := embedded(b, fieldDeleteTarget); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	} else if ok {
		d, err := unmarshalDescriptor(target)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		r.target = &d
	}
	if f.beforeDelete != nil {
		f.beforeDelete(f)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.images[ns][r.key]
	if !ok {
		return status.Errorf(codes.NotFound, "image %q: not found", r.key)
	}
	if r.target != nil && !f.v16 && r.target.Digest != d.Digest {
		return status.Errorf(codes.NotFound, "image %q: target does not match: not found", r.key)
	}
	delete(f.images[ns], r.key)
	f.deletes++
	return stream.SendMsg(&rawMessage{}) // google.protobuf.Empty
}
