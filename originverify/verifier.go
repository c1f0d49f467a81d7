package originverify

import (
	"context"
	"net/http"
	"time"

	"k8s.io/klog/v2"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// userAgent is sent with every request.
const userAgent = "pullrecords-originverify"

// Verifier asks an image's origin registry whether a credential may pull
// it. It is safe for concurrent use; it keeps no state between calls but
// the transport's idle connections.
type Verifier struct {
	transport http.RoundTripper
	insecure  map[string]bool
	timeout   time.Duration
}

// New returns a Verifier speaking HTTPS to every registry unless told
// otherwise by WithInsecureRegistries.
func New(opts ...Option) *Verifier {
	v := &Verifier{
		transport: http.DefaultTransport.(*http.Transport).Clone(),
		insecure:  map[string]bool{},
		timeout:   DefaultTimeout,
	}
	for _, opt := range opts {
		opt(v)
	}
	return v
}

// Verify asks the origin registry of image, with one manifest HEAD, whether
// auth may pull it, and returns the manifest digest the origin answered.
// auth is presented only when it is not nil and its ServerAddress is empty
// or names the image's registry; otherwise the request is anonymous. Every
// error is an *OriginError wrapping ErrDenied, ErrNotFound, ErrUnreachable
// or ErrInvalidReference.
func (v *Verifier) Verify(ctx context.Context, image string, a *imageruntime.AuthConfig) (string, error) {
	t, err := parseTarget(image)
	if err != nil {
		return "", err
	}
	logger := klog.FromContext(ctx).WithValues("registry", t.registry, "repository", t.repository, "reference", t.reference)
	cred, ok := credentialFor(t.registry, a)
	if !ok {
		oe := t.fail(ErrDenied, 0, errUnusableAuth)
		logger.V(2).Info("Origin verification refused before asking", "err", oe)
		return "", oe
	}
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, v.timeout)
		defer cancel()
	}

	x := &exchange{base: v.transport, manifestPath: t.manifestPath()}
	client := &auth.Client{
		Client: &http.Client{Transport: x, CheckRedirect: onlyOriginRedirects},
		Header: http.Header{"User-Agent": {userAgent}},
		Credential: func(_ context.Context, hostport string) (auth.Credential, error) {
			if hostport == t.endpoint {
				return cred, nil
			}
			return auth.EmptyCredential, nil
		},
	}
	repo := &remote.Repository{
		Client:    client,
		Reference: registry.Reference{Registry: t.endpoint, Repository: t.repository, Reference: t.reference},
		PlainHTTP: v.insecure[t.registry],
	}
	desc, err := repo.Resolve(ctx, t.fullReference())
	if err != nil {
		oe := classify(ctx, t, x, err, cred != auth.EmptyCredential)
		oe.Message = truncate(printable(scrub(oe.Message, append(secretsOf(a), x.sentSecrets()...))), maxMessageBytes)
		logger.V(2).Info("Origin did not accept the pull", "credentialSent", cred != auth.EmptyCredential, "err", oe)
		return "", oe
	}
	got := desc.Digest.String()
	if t.digest != "" && got != t.digest {
		oe := t.fail(ErrNotFound, http.StatusOK, "the origin answered digest "+got)
		logger.V(2).Info("Origin answered another digest", "err", oe)
		return "", oe
	}
	logger.V(3).Info("Origin accepted the pull", "credentialSent", cred != auth.EmptyCredential, "digest", got)
	return got, nil
}
