package criproxy

import (
	"context"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// pullImage decodes a PullImage for the gate and lets the gate run it: the
// caller's original frame is forwarded only if the gate calls pull, and the
// runtime's answer reaches the caller only if the gate then returns nil.
// Nothing here logs the request: it carries the credential.
func (p *Proxy) pullImage(ctx context.Context, in *frame) (any, error) {
	req := &runtimeapi.PullImageRequest{}
	if err := proto.Unmarshal(in.bytes(), req); err != nil {
		in.release()
		return nil, malformedPullImage(err)
	}
	image := req.GetImage().GetImage()
	logger := p.logger.WithValues("image", image,
		"pod", klog.KRef(req.GetSandboxConfig().GetMetadata().GetNamespace(), req.GetSandboxConfig().GetMetadata().GetName()))
	ctx = klog.NewContext(ctx, logger)
	var out *frame
	forwarded := false
	err := p.gate.GatePull(ctx, req, func(ctx context.Context) (*runtimeapi.PullImageResponse, error) {
		if forwarded {
			return nil, errPulledTwice
		}
		forwarded = true
		o, err := p.invoke(ctx, PullImageMethod, in)
		if err != nil {
			return nil, err
		}
		resp := &runtimeapi.PullImageResponse{}
		if err := proto.Unmarshal(o.bytes(), resp); err != nil {
			o.release()
			logger.Error(err, "The runtime's PullImage answer does not decode; the pull is refused")
			return nil, undecodablePullImageAnswer(err)
		}
		out = o
		return resp, nil
	})
	if !forwarded {
		in.release()
	}
	if err != nil {
		if out != nil {
			out.release()
		}
		err = refusal(err)
		logger.V(2).Info("Pull refused", "forwarded", forwarded, "err", err)
		return nil, err
	}
	if out == nil {
		// The gate admitted the pull without running it.
		return nil, refusal(errNotPulled)
	}
	return out, nil
}
