package criproxy

import (
	"context"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// pullImage asks the gate about a PullImage, forwards the caller's
// original frame only if it admits the pull, and tells the gate of a pull
// the runtime answered with OK. Nothing here logs the request: it carries
// the credential.
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
	if err := p.gate.AdmitPull(ctx, req); err != nil {
		in.release()
		err = refusal(err)
		logger.V(2).Info("Pull refused, not forwarded to the runtime", "err", err)
		return nil, err
	}
	out, err := p.invoke(ctx, PullImageMethod, in)
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.PullImageResponse{}
	if err := proto.Unmarshal(out.bytes(), resp); err != nil {
		// The caller gets the runtime's answer as it came; the gate
		// records nothing it cannot read.
		logger.Error(err, "The runtime's PullImage answer does not decode; the pull is not recorded")
		return out, nil
	}
	p.gate.PullSucceeded(ctx, req, resp)
	return out, nil
}
