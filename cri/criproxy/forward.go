package criproxy

import (
	"context"
	"errors"
	"io"
	"path"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// bidiStream describes any call to the runtime: a stream open both ways
// carries unary, client-, server- and bidirectional-streaming calls alike,
// since the proxy does not know the arity of a method it does not know.
var bidiStream = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// callOptions are the options of every call to the runtime: raw frames, and
// the kubelet's message size bound.
func callOptions(header, trailer *metadata.MD) []grpc.CallOption {
	return []grpc.CallOption{
		grpc.ForceCodecV2(rawCodec{}),
		grpc.MaxCallRecvMsgSize(maxMessageSize),
		grpc.MaxCallSendMsgSize(maxMessageSize),
		grpc.Header(header),
		grpc.Trailer(trailer),
	}
}

// outgoing is the caller's context (its deadline and cancellation) with the
// caller's metadata to send on. gRPC itself drops the entries it sets
// (content-type, user-agent, pseudo-headers, grpc-timeout, which travels as
// the deadline).
func outgoing(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return metadata.NewOutgoingContext(ctx, md)
}

// unaryHandler forwards one unary call of a known CRI method.
func (p *Proxy) unaryHandler(method string) grpc.MethodHandler {
	return func(_ any, ctx context.Context, decode func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := &frame{}
		if err := decode(in); err != nil {
			return nil, err
		}
		if method == PullImageMethod {
			return p.pullImage(ctx, in)
		}
		return p.invoke(ctx, method, in)
	}
}

// invoke forwards one unary call to the runtime, and the runtime's header
// and trailer back to the caller. An error is the runtime's status as the
// gRPC client reports it (code, message, details), returned as is.
func (p *Proxy) invoke(ctx context.Context, method string, in *frame) (*frame, error) {
	out := &frame{}
	var header, trailer metadata.MD
	err := p.runtime.Invoke(outgoing(ctx), method, in, out, callOptions(&header, &trailer)...)
	in.release() // a no-op unless the call failed before sending it
	if len(header) > 0 {
		_ = grpc.SetHeader(ctx, header)
	}
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
	p.metrics.countForwarded(method, status.Code(err))
	if err != nil {
		out.release()
		return nil, err
	}
	return out, nil
}

// forwardStream forwards a streaming call, or a call to a method this
// build does not know, frame by frame in both directions: the caller's
// half-close becomes a half-close to the runtime, the runtime's header
// goes to the caller before its first message, and its trailer and status
// end the caller's call.
func (p *Proxy) forwardStream(_ any, caller grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(caller)
	if ungatedPull(method) {
		return status.Errorf(codes.PermissionDenied, "%s is refused: the proxy verifies pulls made with %s only", method, PullImageMethod)
	}
	// Cancelled when this returns, so that a caller still sending learns
	// that the call is over and the runtime's side is torn down.
	ctx, cancel := context.WithCancel(caller.Context())
	defer cancel()
	var header, trailer metadata.MD
	runtime, err := p.runtime.NewStream(outgoing(ctx), bidiStream, method, callOptions(&header, &trailer)...)
	if err != nil {
		p.metrics.countForwarded(method, status.Code(err))
		return err
	}
	go forwardRequests(caller, runtime)
	err = forwardResponses(runtime, caller)
	// Header and Trailer call options are filled in when the stream ends.
	if len(trailer) > 0 {
		caller.SetTrailer(trailer)
	}
	p.metrics.countForwarded(method, status.Code(err))
	return err
}

// forwardRequests copies the caller's messages to the runtime until the
// caller half-closes (then it half-closes to the runtime) or either side
// fails. A failure to send needs no report: the runtime's side then ends,
// and forwardResponses returns its status; a failure to receive is the
// caller gone, which cancels the runtime's side through the context.
func forwardRequests(caller grpc.ServerStream, runtime grpc.ClientStream) {
	for {
		f := &frame{}
		if err := caller.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				_ = runtime.CloseSend()
			}
			return
		}
		if err := runtime.SendMsg(f); err != nil {
			f.release()
			return
		}
	}
}

// forwardResponses copies the runtime's header and messages to the caller
// and returns the runtime's final status (nil for OK).
func forwardResponses(runtime grpc.ClientStream, caller grpc.ServerStream) error {
	// Header blocks until the runtime answers; a nil header with a nil
	// error is a trailers-only answer, whose status RecvMsg returns.
	if md, err := runtime.Header(); err == nil && md != nil {
		if err := caller.SendHeader(md); err != nil {
			return err
		}
	}
	for {
		f := &frame{}
		if err := runtime.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := caller.SendMsg(f); err != nil {
			f.release()
			return err
		}
	}
}

// ungatedPull reports whether method is a PullImage the gate does not see:
// one of another CRI version (containerd 1.6 still serves
// runtime.v1alpha2) or of any other service. Forwarding it would let a
// caller of the proxy's socket pull without verification.
func ungatedPull(method string) bool {
	return method != PullImageMethod && path.Base(method) == "PullImage"
}
