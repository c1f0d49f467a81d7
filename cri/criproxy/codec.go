package criproxy

import (
	"fmt"

	"google.golang.org/grpc/mem"
)

// frame is one gRPC message as it travels on the wire, never decoded. It
// holds a reference to the buffers gRPC received it in, so forwarding it
// copies nothing.
type frame struct {
	data mem.BufferSlice
}

// bytes returns the frame's content in one slice (a copy when gRPC
// received it in several buffers), for the one request the proxy decodes.
func (f *frame) bytes() []byte {
	if len(f.data) == 1 {
		return f.data[0].ReadOnlyData()
	}
	return f.data.Materialize()
}

// release drops the frame's reference to its buffers, for a frame that is
// not forwarded. It may be called more than once.
func (f *frame) release() {
	f.data.Free()
	f.data = nil
}

// rawCodec is a gRPC codec (encoding.CodecV2) that moves frames without
// decoding them. It names itself "proto" so that the content type on both
// hops stays application/grpc+proto, as the kubelet and the runtime
// expect; it is only ever installed explicitly (ForceServerCodecV2,
// ForceCodecV2), never registered.
type rawCodec struct{}

// Marshal hands the frame's reference to gRPC, which frees it once the
// message is written; a frame is marshalled at most once.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("criproxy: cannot marshal %T, only raw frames", v)
	}
	data := f.data
	f.data = nil
	return data, nil
}

// Unmarshal keeps a reference to data, which gRPC frees when Unmarshal
// returns.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("criproxy: cannot unmarshal into %T, only raw frames", v)
	}
	data.Ref()
	f.data = data
	return nil
}

func (rawCodec) Name() string { return "proto" }
