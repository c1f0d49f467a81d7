package containerdapi

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers, from containerd's api/services/content/v1/content.proto,
// api/services/images/v1/images.proto and api/types/descriptor.proto; the
// same in containerd 1.6 and 2.x (2.x only adds DeleteImageRequest.target).
const (
	// InfoRequest, ReadContentRequest, GetImageRequest, DeleteImageRequest.
	fieldRequestDigestOrName protowire.Number = 1
	// ReadContentRequest.
	fieldReadOffset protowire.Number = 2
	fieldReadSize   protowire.Number = 3
	// InfoResponse.info, GetImageResponse.image.
	fieldResponseObject protowire.Number = 1
	// Info.
	fieldInfoDigest protowire.Number = 1
	fieldInfoSize   protowire.Number = 2
	// ReadContentResponse.
	fieldChunkOffset protowire.Number = 1
	fieldChunkData   protowire.Number = 2
	// Image.
	fieldImageName   protowire.Number = 1
	fieldImageTarget protowire.Number = 3
	// Descriptor.
	fieldDescMediaType protowire.Number = 1
	fieldDescDigest    protowire.Number = 2
	fieldDescSize      protowire.Number = 3
	// DeleteImageRequest (2 is sync, always left false here).
	fieldDeleteTarget protowire.Number = 3
)

// descriptor is containerd.types.Descriptor without its annotations.
type descriptor struct {
	MediaType string
	Digest    string
	Size      int64
}

// image is containerd.services.images.v1.Image without labels and times.
type image struct {
	Name   string
	Target descriptor
}

// appendString appends field num as a string, omitted when empty (proto3).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendInt64 appends field num as an int64 varint, omitted when zero.
func appendInt64(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// appendMessage appends field num as an embedded message (present even
// when empty).
func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func (d descriptor) marshal() []byte {
	var b []byte
	b = appendString(b, fieldDescMediaType, d.MediaType)
	b = appendString(b, fieldDescDigest, d.Digest)
	return appendInt64(b, fieldDescSize, d.Size)
}

func (im image) marshal() []byte {
	b := appendString(nil, fieldImageName, im.Name)
	return appendMessage(b, fieldImageTarget, im.Target.marshal())
}

// field is one decoded field: val for length-delimited, u for varint.
type field struct {
	num protowire.Number
	typ protowire.Type
	val []byte
	u   uint64
}

// eachField calls fn for every field of message b, in wire order. Unknown
// fields reach fn too; fn ignores the numbers it does not know.
func eachField(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrBadResponse, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.val, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrBadResponse, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// want checks that a known field has the wire type its .proto gives it.
func (f field) want(typ protowire.Type) error {
	if f.typ != typ {
		return fmt.Errorf("%w: field %d has wire type %d, want %d", ErrBadResponse, f.num, f.typ, typ)
	}
	return nil
}

// int64Field and stringField decode a known scalar field.
func (f field) int64Field() (int64, error) {
	if err := f.want(protowire.VarintType); err != nil {
		return 0, err
	}
	return int64(f.u), nil
}

func (f field) stringField() (string, error) {
	if err := f.want(protowire.BytesType); err != nil {
		return "", err
	}
	return string(f.val), nil
}

// embedded returns the bytes of message field num of b (the last one, as
// protobuf merges repeated occurrences of a singular message only for
// known types; containerd sends it once) and whether it was there.
func embedded(b []byte, num protowire.Number) ([]byte, bool, error) {
	var out []byte
	found := false
	err := eachField(b, func(f field) error {
		if f.num != num {
			return nil
		}
		if err := f.want(protowire.BytesType); err != nil {
			return err
		}
		out, found = f.val, true
		return nil
	})
	return out, found, err
}

func unmarshalDescriptor(b []byte) (descriptor, error) {
	var d descriptor
	err := eachField(b, func(f field) error {
		var err error
		switch f.num {
		case fieldDescMediaType:
			d.MediaType, err = f.stringField()
		case fieldDescDigest:
			d.Digest, err = f.stringField()
		case fieldDescSize:
			d.Size, err = f.int64Field()
		}
		return err
	})
	return d, err
}

func unmarshalImage(b []byte) (image, error) {
	var im image
	err := eachField(b, func(f field) error {
		switch f.num {
		case fieldImageName:
			var err error
			im.Name, err = f.stringField()
			return err
		case fieldImageTarget:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			var err error
			im.Target, err = unmarshalDescriptor(f.val)
			return err
		}
		return nil
	})
	return im, err
}
