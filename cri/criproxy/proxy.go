package criproxy

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// PullImageMethod is the one method the proxy does not forward blindly.
const PullImageMethod = "/runtime.v1.ImageService/PullImage"

// DefaultStopTimeout is how long Stop waits for calls in flight before it
// closes every connection.
const DefaultStopTimeout = 10 * time.Second

// maxMessageSize bounds a message in either direction, as the kubelet's
// own CRI client does (16 MiB), so that a large ListContainers that the
// kubelet accepts directly passes through the proxy too.
const maxMessageSize = 16 << 20

// criServices are the services the proxy registers method by method, so
// their unary calls take gRPC's cheaper unary path; anything else reaches
// the unknown-service handler and is forwarded as a stream.
var criServices = []*grpc.ServiceDesc{
	&runtimeapi.RuntimeService_ServiceDesc,
	&runtimeapi.ImageService_ServiceDesc,
}

// Gate decides whether a PullImage may reach the runtime, and may refuse
// it afterwards when what the runtime pulled is not what it admitted.
type Gate interface {
	// GatePull is called once per PullImage with the decoded request. It
	// calls pull at most once, and only for a pull it admits: pull
	// forwards the caller's original frame to the runtime and returns the
	// runtime's decoded answer, or the runtime's error as is. GatePull
	// returns nil to hand the runtime's answer to the caller; an error
	// refuses the pull, before or after pull ran: one carrying a gRPC
	// status (status.FromError ok) reaches the caller as is, any other as
	// codes.Unknown with its message. The message reaches the kubelet and
	// its events: it must not hold a credential.
	GatePull(ctx context.Context, req *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error
}

// Option configures New.
type Option func(*Proxy)

// WithMetrics counts forwarded calls in m (nil: not counted).
func WithMetrics(m *Metrics) Option { return func(p *Proxy) { p.metrics = m } }

// WithLogger sets the logger the proxy's own messages go to (default
// klog.Background()). It is put into the context of the gate's calls.
func WithLogger(logger klog.Logger) Option { return func(p *Proxy) { p.logger = logger } }

// WithStopTimeout sets how long Stop waits for calls in flight (default
// DefaultStopTimeout); zero or less closes the connections at once.
func WithStopTimeout(d time.Duration) Option { return func(p *Proxy) { p.stopTimeout = d } }

// WithClock sets the clock Stop's bound is measured with (default the real
// one).
func WithClock(c clock.Clock) Option { return func(p *Proxy) { p.clock = c } }

// Proxy is a CRI proxy: a gRPC server that forwards every call to the
// runtime's connection unchanged, except that a PullImage goes through the
// Gate first.
type Proxy struct {
	runtime     *grpc.ClientConn
	gate        Gate
	server      *grpc.Server
	metrics     *Metrics
	logger      klog.Logger
	clock       clock.Clock
	stopTimeout time.Duration
}

// New returns a proxy in front of runtime (the real runtime's connection,
// which the caller dials and closes) that asks gate about every PullImage.
// runtime and gate must not be nil.
func New(runtime *grpc.ClientConn, gate Gate, opts ...Option) *Proxy {
	if runtime == nil || gate == nil {
		panic("criproxy.New: nil runtime connection or gate")
	}
	p := &Proxy{
		runtime:     runtime,
		gate:        gate,
		logger:      klog.Background(),
		clock:       clock.RealClock{},
		stopTimeout: DefaultStopTimeout,
	}
	for _, o := range opts {
		o(p)
	}
	p.server = grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(p.forwardStream),
		grpc.MaxRecvMsgSize(maxMessageSize),
		grpc.MaxSendMsgSize(maxMessageSize),
	)
	for _, sd := range criServices {
		p.server.RegisterService(p.passThrough(sd), p)
	}
	return p
}

// passThrough is sd with every method forwarding raw frames.
func (p *Proxy) passThrough(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := &grpc.ServiceDesc{
		ServiceName: sd.ServiceName,
		HandlerType: (*any)(nil),
		Metadata:    sd.Metadata,
	}
	for _, m := range sd.Methods {
		out.Methods = append(out.Methods, grpc.MethodDesc{
			MethodName: m.MethodName,
			Handler:    p.unaryHandler("/" + sd.ServiceName + "/" + m.MethodName),
		})
	}
	for _, s := range sd.Streams {
		out.Streams = append(out.Streams, grpc.StreamDesc{
			StreamName:    s.StreamName,
			Handler:       p.forwardStream,
			ServerStreams: s.ServerStreams,
			ClientStreams: s.ClientStreams,
		})
	}
	return out
}

// Serve accepts connections on lis until Stop; it returns nil after Stop,
// and grpc.ErrServerStopped when called after it.
func (p *Proxy) Serve(lis net.Listener) error {
	return p.server.Serve(lis)
}

// Stop stops accepting connections and waits, at most the stop timeout,
// for calls in flight to end; then it closes every connection, cancelling
// the calls still running (and their calls to the runtime). Long-lived
// streams such as the kubelet's GetContainerEvents never end by
// themselves, so a stop with one open takes the whole timeout.
func (p *Proxy) Stop() {
	if p.stopTimeout <= 0 {
		p.server.Stop()
		return
	}
	done := make(chan struct{})
	go func() {
		p.server.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-p.clock.After(p.stopTimeout):
		p.logger.Info("Calls still running after the stop timeout; closing their connections", "timeout", p.stopTimeout)
		p.server.Stop()
		<-done
	}
}
