package containerdapi

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// rawMessage is one protobuf message already encoded (a request this
// package built with protowire) or still encoded (an answer it decodes
// itself).
type rawMessage struct {
	b []byte
}

// rawCodec is a gRPC codec (encoding.CodecV2) for rawMessage values. It
// names itself "proto" so that the content type stays
// application/grpc+proto, which is what containerd serves; it is only ever
// installed per call (ForceCodecV2), never registered, so it changes
// nothing for other users of the connection.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*rawMessage)
	if !ok {
		return nil, fmt.Errorf("containerdapi: cannot marshal %T, only raw messages", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
}

// Unmarshal copies data out: gRPC frees its buffers when Unmarshal returns.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("containerdapi: cannot unmarshal into %T, only raw messages", v)
	}
	m.b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// callCodec is the call option every call of this package passes.
var callCodec = grpc.ForceCodecV2(rawCodec{})
