package containerdapi

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// answering serves every unary call with answer, whatever was asked.
func answering(t *testing.T, answer []byte) *grpc.ClientConn {
	t.Helper()
	return serveOn(t, grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var req rawMessage
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		return stream.SendMsg(&rawMessage{b: answer})
	})))
}

func TestMalformedAnswers(t *testing.T) {
	info := func(dgst string, size int64) []byte {
		b := appendString(nil, fieldInfoDigest, dgst)
		return appendMessage(nil, fieldResponseObject, appendInt64(b, fieldInfoSize, size))
	}
	img := func(name, target string) []byte {
		return appendMessage(nil, fieldResponseObject, image{Name: name, Target: descriptor{Digest: target}}.marshal())
	}
	sizeAsString := appendMessage(nil, fieldResponseObject, appendString(appendString(nil, fieldInfoDigest, absentDigest), fieldInfoSize, "12"))
	truncated := info(absentDigest, 5)
	truncated = truncated[:len(truncated)-1]
	withUnknown := protowire.AppendVarint(protowire.AppendTag(info(absentDigest, 5), 99, protowire.VarintType), 7)

	sizeTests := []struct {
		name     string
		answer   []byte
		wantSize int64
		wantErr  error
	}{
		{name: "good", answer: info(absentDigest, 5), wantSize: 5},
		{name: "unknown fields are skipped", answer: withUnknown, wantSize: 5},
		{name: "no info", answer: nil, wantErr: ErrBadResponse},
		{name: "info of another digest", answer: info(manifestA, 5), wantErr: ErrBadResponse},
		{name: "negative size", answer: info(absentDigest, -1), wantErr: ErrBadResponse},
		{name: "size with the wrong wire type", answer: sizeAsString, wantErr: ErrBadResponse},
		{name: "truncated", answer: truncated, wantErr: ErrBadResponse},
	}
	for _, tc := range sizeTests {
		t.Run("Size "+tc.name, func(t *testing.T) {
			size, ok, err := NewContent(answering(t, tc.answer), "").Size(context.Background(), absentDigest)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Size = %d, %v, %v; want %v", size, ok, err, tc.wantErr)
			}
			if tc.wantErr == nil && (!ok || size != tc.wantSize) {
				t.Errorf("Size = %d, %v; want %d, true", size, ok, tc.wantSize)
			}
			if tc.wantErr != nil && ok {
				t.Errorf("Size answered ok with an error")
			}
		})
	}

	targetTests := []struct {
		name    string
		answer  []byte
		want    string
		wantErr error
	}{
		{name: "good", answer: img(nameA, manifestA), want: manifestA},
		{name: "no image", answer: nil, wantErr: ErrBadResponse},
		{name: "another name", answer: img(nameB, manifestA), wantErr: ErrBadResponse},
		{name: "no target", answer: img(nameA, ""), wantErr: ErrBadResponse},
	}
	for _, tc := range targetTests {
		t.Run("Target "+tc.name, func(t *testing.T) {
			got, ok, err := NewImages(answering(t, tc.answer), "").Target(context.Background(), nameA)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Target = %q, %v, %v; want %v", got, ok, err, tc.wantErr)
			}
			if got != tc.want || ok != (tc.wantErr == nil) {
				t.Errorf("Target = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// TestRequestEncoding pins the bytes of the requests against the field
// numbers of containerd's .proto files.
func TestRequestEncoding(t *testing.T) {
	d := descriptor{MediaType: "m", Digest: "d", Size: 3}
	// Descriptor: 1 media_type, 2 digest, 3 size.
	if got, want := d.marshal(), []byte{0x0a, 1, 'm', 0x12, 1, 'd', 0x18, 3}; string(got) != string(want) {
		t.Errorf("descriptor = % x, want % x", got, want)
	}
	// ReadContentRequest: 1 digest, 2 offset, 3 size.
	req := appendInt64(appendInt64(appendString(nil, fieldRequestDigestOrName, "d"), fieldReadOffset, 2), fieldReadSize, 1)
	if want := []byte{0x0a, 1, 'd', 0x10, 2, 0x18, 1}; string(req) != string(want) {
		t.Errorf("read request = % x, want % x", req, want)
	}
	// DeleteImageRequest: 1 name, 3 target (sync, 2, left false).
	del := appendMessage(appendString(nil, fieldRequestDigestOrName, "n"), fieldDeleteTarget, descriptor{Digest: "d"}.marshal())
	if want := []byte{0x0a, 1, 'n', 0x1a, 3, 0x12, 1, 'd'}; string(del) != string(want) {
		t.Errorf("delete request = % x, want % x", del, want)
	}
}
