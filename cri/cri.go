package cri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// Default per-call timeouts.
const (
	defaultPullTimeout = 2 * time.Minute
	defaultCallTimeout = 10 * time.Second
	// maxMsgSize bounds a response (a ListImages of a large node).
	maxMsgSize = 16 << 20
)

// authToCRI converts a registry credential for PullImage. Email has no CRI
// field and is not sent.
func authToCRI(a *imageruntime.AuthConfig) *runtimeapi.AuthConfig {
	if a == nil {
		return nil
	}
	return &runtimeapi.AuthConfig{
		Username:      a.Username,
		Password:      a.Password,
		Auth:          a.Auth,
		ServerAddress: a.ServerAddress,
		IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken,
	}
}

// authSecrets are the fields of a that must never appear in an error.
func authSecrets(a *imageruntime.AuthConfig) []string {
	if a == nil {
		return nil
	}
	return []string{a.Password, a.Auth, a.IdentityToken, a.RegistryToken}
}

// Option configures Dial. An option given a value it cannot use (a negative
// timeout) makes Dial fail with an error matching ErrInvalidOption that names
// the option and the value; it is never ignored or adjusted.
type Option func(*options)

type options struct {
	pullTimeout time.Duration
	callTimeout time.Duration
}

// withPullTimeout sets the timeout of each PullImage call (default
// 2 minutes). Zero means no timeout beyond the caller's context; a
// negative d is invalid (ErrInvalidOption).
func withPullTimeout(d time.Duration) Option { return func(o *options) { o.pullTimeout = d } }

// WithCallTimeout sets the timeout of every other call, including the check
// Dial makes (default 10 seconds). Zero means no timeout beyond the
// caller's context; a negative d is invalid (ErrInvalidOption).
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// validate reports the first option value Dial cannot use.
func (o *options) validate() error {
	switch {
	case o.pullTimeout < 0:
		return fmt.Errorf("%w: withPullTimeout(%v): want 0 (none) or more", ErrInvalidOption, o.pullTimeout)
	case o.callTimeout < 0:
		return fmt.Errorf("%w: WithCallTimeout(%v): want 0 (none) or more", ErrInvalidOption, o.callTimeout)
	}
	return nil
}

// ImageService is a connection to a CRI v1 image service. It is safe for
// concurrent use.
type ImageService struct {
	path    string
	conn    *grpc.ClientConn
	client  runtimeapi.ImageServiceClient
	runtime runtimeapi.RuntimeServiceClient
	opts    options
	closed  atomic.Bool
}

// socketPath turns an endpoint ("unix:///path" or "/path") into the socket
// path, or returns ErrInvalidEndpoint.
func socketPath(endpoint string) (string, error) {
	p := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		p = rest
	} else if strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("%w: %q: only unix sockets are supported", ErrInvalidEndpoint, endpoint)
	}
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q: want unix:///absolute/path or /absolute/path", ErrInvalidEndpoint, endpoint)
	}
	return filepath.Clean(p), nil
}

// NewConn returns a gRPC connection to the CRI endpoint ("unix:///path" or
// "/path"; anything else is ErrInvalidEndpoint), dialled as Dial dials it:
// plain unix socket, the kubelet's 16 MiB message bound, and quick
// reconnects after a runtime restart (at most 2 s apart instead of gRPC's
// default two minutes). It connects lazily and checks nothing; the caller
// closes it. For callers that speak to the runtime themselves, such as a
// CRI proxy.
func NewConn(endpoint string) (*grpc.ClientConn, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidEndpoint, path, err)
	}
	return conn, nil
}

// Dial connects to the CRI image service at endpoint ("unix:///path" or
// "/path"; anything else is ErrInvalidEndpoint) and checks that it answers
// the runtime.v1 ImageService (with an ImageFsInfo call). It fails with
// ErrEndpointNotFound when the socket is missing or nothing listens on it
// (connection refused), and with ErrNotCRI when something listens but is not
// a CRI image service: a server that does not speak gRPC, or a gRPC server
// without runtime.v1 ImageService. An invalid option fails it with
// ErrInvalidOption before anything is dialled.
func Dial(ctx context.Context, endpoint string, opts ...Option) (*ImageService, error) {
	o := options{pullTimeout: defaultPullTimeout, callTimeout: defaultCallTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no socket at %s", ErrEndpointNotFound, path)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrEndpointNotFound, path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%w: %s is not a socket", ErrInvalidEndpoint, path)
	}
	conn, err := NewConn(path)
	if err != nil {
		return nil, err
	}
	s := &ImageService{path: path, conn: conn, client: runtimeapi.NewImageServiceClient(conn),
		runtime: runtimeapi.NewRuntimeServiceClient(conn), opts: o}
	if err := s.check(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Connected to CRI image service", "endpoint", path)
	return s, nil
}

func (s *ImageService) check(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	_, err := s.client.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err == nil {
		return nil
	}
	ce := newCallError("ImageFsInfo", "", err)
	switch ce.Code {
	case codes.Unimplemented:
		return fmt.Errorf("%w: %s: %s", ErrNotCRI, s.path, ce.Message)
	case codes.Unavailable:
		// gRPC says Unavailable both when nothing listens and when the
		// listener does not speak gRPC; a plain connection tells them apart.
		if socketGone(ce.Message) || !listening(ctx, s.path, s.opts.callTimeout) {
			return fmt.Errorf("%w: nothing serves CRI at %s: %w", ErrEndpointNotFound, s.path, ce)
		}
		return fmt.Errorf("%w: %s accepts connections but does not answer gRPC: %w", ErrNotCRI, s.path, ce)
	}
	return fmt.Errorf("checking CRI image service at %s: %w", s.path, ce)
}

// socketGone recognises gRPC's text for a connection that could not be made
// at all.
func socketGone(msg string) bool {
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such file or directory")
}

// listening reports whether something accepts a connection on the socket.
func listening(ctx context.Context, path string, timeout time.Duration) bool {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Endpoint returns the socket path.
func (s *ImageService) Endpoint() string { return s.path }

// Close closes the connection. Calls after Close fail with ErrClosed.
func (s *ImageService) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.conn.Close()
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// ListImages lists every image the runtime has. It satisfies
// imageruntime.ImageLister.
func (s *ImageService) ListImages(ctx context.Context) ([]imageruntime.Image, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := withTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	resp, err := s.client.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, newCallError("ListImages", "", err)
	}
	out := make([]imageruntime.Image, 0, len(resp.GetImages()))
	for _, img := range resp.GetImages() {
		out = append(out, toImage(img))
	}
	return out, nil
}

// ImageStatus returns the image the runtime resolves image to, or nil when
// the runtime does not have it. Presence is the runtime's exact answer for
// that reference, not a text search.
func (s *ImageService) ImageStatus(ctx context.Context, image string) (*imageruntime.Image, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := withTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	resp, err := s.client.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return nil, newCallError("ImageStatus", image, err)
	}
	img := resp.GetImage()
	if img == nil {
		return nil, nil
	}
	out := toImage(img)
	return &out, nil
}

func toImage(img *runtimeapi.Image) imageruntime.Image {
	return imageruntime.Image{ID: img.GetId(), RepoTags: img.GetRepoTags(), RepoDigests: img.GetRepoDigests(), Size: img.GetSize()}
}

// PullImage pulls image with the optional registry auth and returns the
// imageRef (image ID) the runtime reports. auth's Email is not sent (the CRI
// has no such field). The error never contains auth's secrets.
func (s *ImageService) PullImage(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	ctx, cancel := withTimeout(ctx, s.opts.pullTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Pulling image", "image", image, "withAuth", auth != nil)
	resp, err := s.client.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: image},
		Auth:  authToCRI(auth),
	})
	if err != nil {
		return "", newCallError("PullImage", image, err, authSecrets(auth)...)
	}
	if resp.GetImageRef() == "" {
		return "", &CallError{Op: "PullImage", Image: image, Code: codes.Internal, Message: "runtime returned an empty image reference"}
	}
	return resp.GetImageRef(), nil
}

// RemoveImage removes image. Removing an absent image is not an error (the
// CRI contract makes RemoveImage idempotent).
func (s *ImageService) RemoveImage(ctx context.Context, image string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := withTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	_, err := s.client.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		ce := newCallError("RemoveImage", image, err)
		if ce.Code == codes.NotFound {
			return nil
		}
		return ce
	}
	return nil
}
