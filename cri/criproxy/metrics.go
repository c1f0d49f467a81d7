package criproxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// unknownMethod is the method label of calls to methods this build does
// not know, so that a client cannot grow the label set without bound.
const unknownMethod = "unknown"

// Metrics counts the calls the proxy forwards. A nil *Metrics counts
// nothing. Nothing is registered until Register.
type Metrics struct {
	forwarded *prometheus.CounterVec
}

// NewMetrics returns the proxy's metrics:
//
//	pullrecords_shim_forwarded_calls_total{method, code}
//
// counts every call forwarded to the runtime, by full gRPC method name
// ("/runtime.v1.ImageService/ImageStatus", or "unknown" for a method of a
// service or version this build does not know) and by the gRPC code the
// caller got ("OK", "NotFound", ...). A PullImage the gate refused, or whose
// request did not decode, is not forwarded and not counted here.
func NewMetrics() *Metrics {
	return &Metrics{forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pullrecords_shim_forwarded_calls_total",
		Help: "CRI calls the shim forwarded to the container runtime, by method and gRPC code.",
	}, []string{"method", "code"})}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	return r.Register(m.forwarded)
}

// knownMethods are the CRI v1 methods of this build, the only method
// labels besides unknownMethod.
var knownMethods = func() map[string]bool {
	known := map[string]bool{}
	for _, sd := range criServices {
		for _, m := range sd.Methods {
			known["/"+sd.ServiceName+"/"+m.MethodName] = true
		}
		for _, s := range sd.Streams {
			known["/"+sd.ServiceName+"/"+s.StreamName] = true
		}
	}
	return known
}()

func (m *Metrics) countForwarded(method string, code codes.Code) {
	if m == nil {
		return
	}
	if !knownMethods[method] {
		method = unknownMethod
	}
	m.forwarded.WithLabelValues(method, code.String()).Inc()
}
