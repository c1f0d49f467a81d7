package crishim

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// Pod names the pod a pull is for, from the CRI sandbox metadata.
type Pod struct {
	Namespace, Name, UID string
}

// String returns "namespace/name", or "<unknown>" when the request carried
// no sandbox metadata.
func (p Pod) String() string {
	if p.Namespace == "" && p.Name == "" {
		return "<unknown>"
	}
	return p.Namespace + "/" + p.Name
}

// Request is one PullImage call as the gate sees it.
type Request struct {
	// Image is the image string the kubelet asked for, verbatim.
	Image string
	// Auth is the credential the kubelet sent, nil for none.
	Auth *imageruntime.AuthConfig
	Pod  Pod
}

// RequestFromCRI converts a CRI PullImageRequest. Auth is nil when the
// request has none or all its fields are empty; Pod is empty when the
// request has no sandbox metadata. A nil request gives an empty Request.
func RequestFromCRI(req *runtimeapi.PullImageRequest) Request {
	r := Request{Image: req.GetImage().GetImage()}
	if a := req.GetAuth(); a != nil {
		auth := imageruntime.AuthConfig{
			Username:      a.GetUsername(),
			Password:      a.GetPassword(),
			Auth:          a.GetAuth(),
			ServerAddress: a.GetServerAddress(),
			IdentityToken: a.GetIdentityToken(),
			RegistryToken: a.GetRegistryToken(),
		}
		if auth != (imageruntime.AuthConfig{}) {
			r.Auth = &auth
		}
	}
	if m := req.GetSandboxConfig().GetMetadata(); m != nil {
		r.Pod = Pod{Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUid()}
	}
	return r
}
