package criproxy_test

import (
	"context"
	"errors"
	"io"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoService is a test-only gRPC service the proxy knows nothing of,
// served next to the fake runtime: unary, server-, client- and
// bidirectional-streaming methods that reflect what they receive,
// metadata included.
type echoService struct {
	// hung receives the context error of a Hang or HangStream call when
	// its caller goes away.
	hung chan error
	// hanging receives a value when a Hang call reached the service.
	hanging chan struct{}
}

const echoServiceName = "pullrecords.test.Echo"

func newEchoService() *echoService {
	return &echoService{hung: make(chan error, 4), hanging: make(chan struct{}, 4)}
}

// failStatus is the answer to a message "fail": a status with details.
func failStatus() *status.Status {
	s, err := status.New(codes.FailedPrecondition, "told to fail").WithDetails(wrapperspb.String("the detail"))
	if err != nil {
		panic(err)
	}
	return s
}

// reflectMetadata sends the caller's x-req metadata back in the header
// (x-header) and trailer (x-trailer).
func reflectMetadata(ctx context.Context, setHeader func(metadata.MD) error, setTrailer func(metadata.MD)) error {
	md, _ := metadata.FromIncomingContext(ctx)
	req := md.Get("x-req")
	if err := setHeader(metadata.Pairs("x-header", "header of "+firstOr(req, "none"))); err != nil {
		return err
	}
	setTrailer(metadata.Pairs("x-trailer", "trailer of "+firstOr(req, "none")))
	return nil
}

func firstOr(v []string, or string) string {
	if len(v) == 0 {
		return or
	}
	return v[0]
}

func (e *echoService) register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: echoServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Echo", Handler: e.echo},
			{MethodName: "Hang", Handler: e.hang},
		},
		Streams: []grpc.StreamDesc{
			{StreamName: "Count", Handler: e.count, ServerStreams: true},
			{StreamName: "Sum", Handler: e.sum, ClientStreams: true},
			{StreamName: "Chat", Handler: e.chat, ServerStreams: true, ClientStreams: true},
			{StreamName: "HangStream", Handler: e.hangStream, ServerStreams: true},
		},
	}, e)
}

func (e *echoService) echo(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := &wrapperspb.StringValue{}
	if err := dec(in); err != nil {
		return nil, err
	}
	if err := reflectMetadata(ctx, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) },
		func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }); err != nil {
		return nil, err
	}
	if in.Value == "fail" {
		return nil, failStatus().Err()
	}
	return wrapperspb.String(in.Value + " back"), nil
}

func (e *echoService) hang(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	if err := dec(&wrapperspb.StringValue{}); err != nil {
		return nil, err
	}
	e.hanging <- struct{}{}
	<-ctx.Done()
	e.hung <- ctx.Err()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// count answers a message "n" with n messages "0" … "n-1".
func (e *echoService) count(_ any, s grpc.ServerStream) error {
	in := &wrapperspb.StringValue{}
	if err := s.RecvMsg(in); err != nil {
		return err
	}
	if err := reflectMetadata(s.Context(), s.SendHeader, s.SetTrailer); err != nil {
		return err
	}
	n, err := strconv.Atoi(in.Value)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	for i := range n {
		if err := s.SendMsg(wrapperspb.String(strconv.Itoa(i))); err != nil {
			return err
		}
	}
	return nil
}

// sum answers the caller's messages, after its half-close, with one
// message: their number and their concatenation.
func (e *echoService) sum(_ any, s grpc.ServerStream) error {
	var n int
	var all string
	for {
		in := &wrapperspb.StringValue{}
		err := s.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n++
		all += in.Value
	}
	return s.SendMsg(wrapperspb.String(strconv.Itoa(n) + ":" + all))
}

// chat echoes every message as it comes, and says "bye" after the
// caller's half-close; a message "fail" ends the call with failStatus.
func (e *echoService) chat(_ any, s grpc.ServerStream) error {
	if err := reflectMetadata(s.Context(), s.SendHeader, s.SetTrailer); err != nil {
		return err
	}
	for {
		in := &wrapperspb.StringValue{}
		err := s.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return s.SendMsg(wrapperspb.String("bye"))
		}
		if err != nil {
			return err
		}
		if in.Value == "fail" {
			return failStatus().Err()
		}
		if err := s.SendMsg(wrapperspb.String("echo:" + in.Value)); err != nil {
			return err
		}
	}
}

func (e *echoService) hangStream(_ any, s grpc.ServerStream) error {
	if err := s.SendMsg(wrapperspb.String("started")); err != nil {
		return err
	}
	<-s.Context().Done()
	e.hung <- s.Context().Err()
	return status.FromContextError(s.Context().Err()).Err()
}

func echoMethod(name string) string { return "/" + echoServiceName + "/" + name }
