package kubeletadapter

import (
	"context"
	"errors"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/kubernetes/pkg/credentialprovider"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// kubeletImageService presents the kubelet's own image service (the
// runtime manager, kubecontainer.ImageService) as the image cache's
// imagecache.ImageService, so the in-process cache pulls through the very
// client, runtime endpoint and timeouts the kubelet uses.
//
// Its errors are *cri.CallError (cri.AsCallError): the kubelet returns the
// runtime's gRPC status errors, and cri's rules classify them for the cache
// (Unauthorized, Timeout, Transient), as they do for cri's own client. No
// credential is in an error: the secrets of the credential passed are
// removed from the runtime's text.
type kubeletImageService struct {
	images kubecontainer.ImageService
}

var _ imagecache.ImageService = kubeletImageService{}

// ImageStatus asks the runtime for image (GetImageRef). The kubelet's
// service says only the image ID, so the Image has no tags, digests or
// size; the cache uses the ID alone.
func (s kubeletImageService) ImageStatus(ctx context.Context, image string) (*imageruntime.Image, error) {
	ref, err := s.images.GetImageRef(ctx, kubecontainer.ImageSpec{Image: image})
	if err != nil {
		return nil, cri.AsCallError("ImageStatus", image, err)
	}
	if ref == "" {
		return nil, nil
	}
	return &imageruntime.Image{ID: ref}, nil
}

// PullImage pulls image with the one credential auth (nil: anonymously)
// and no pod sandbox configuration, as the kubelet pulls for a pod: every
// field of auth the CRI carries is passed (Email has no CRI field).
func (s kubeletImageService) PullImage(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	var creds []credentialprovider.TrackedAuthConfig
	var secrets []string
	if auth != nil {
		creds = []credentialprovider.TrackedAuthConfig{{AuthConfig: credentialprovider.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			Auth:          auth.Auth,
			ServerAddress: auth.ServerAddress,
			IdentityToken: auth.IdentityToken,
			RegistryToken: auth.RegistryToken,
		}}}
		secrets = []string{auth.Password, auth.Auth, auth.IdentityToken, auth.RegistryToken}
	}
	ref, _, err := s.images.PullImage(ctx, kubecontainer.ImageSpec{Image: image}, creds, nil)
	if err != nil {
		return "", cri.AsCallError("PullImage", image, onlyError(err), secrets...)
	}
	if ref == "" {
		return "", cri.AsCallError("PullImage", image, errEmptyImageRef)
	}
	return ref, nil
}

// RemoveImage removes image. An image the runtime does not have is not an
// error (the CRI's RemoveImage is idempotent; a runtime answering NotFound
// is taken at its word).
func (s kubeletImageService) RemoveImage(ctx context.Context, image string) error {
	err := s.images.RemoveImage(ctx, kubecontainer.ImageSpec{Image: image})
	if err == nil {
		return nil
	}
	ce := cri.AsCallError("RemoveImage", image, err)
	if errors.Is(ce, cri.ErrNotFound) {
		return nil
	}
	return ce
}

// onlyError unwraps the aggregate the kubelet's PullImage returns around
// the errors of the credentials it tried when it holds one error (the
// cache passes one credential per call): an aggregate hides the gRPC status
// from errors.As.
func onlyError(err error) error {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		if errs := agg.Errors(); len(errs) == 1 {
			return errs[0]
		}
	}
	return err
}
