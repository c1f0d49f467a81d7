package originverify

import (
	"context"
	"fmt"
	"net/http"

	"github.com/opencontainers/go-digest"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// Proof is what one verification proved and what it cost.
type Proof struct {
	// Digest is the verified manifest digest (what Verify returns): the
	// requested digest, or for a tag the sha256 of the bytes served.
	Digest string
	// Manifests is the number of manifests fetched and hashed.
	Manifests int
	// BlobsChallenged is the number of blobs answered by ranges.
	BlobsChallenged int
	// BlobsFetched is the number of blobs fetched whole and hashed.
	BlobsFetched int
	// BytesFetched is the body bytes read from the registry (and its
	// token service), manifests included.
	BytesFetched int64
	// Requests is the number of HTTP requests sent, token service and
	// redirects included.
	Requests int
}

// Prove asks the origin registry of image, with auth, for the proof that
// it holds the image's content: the manifest fetched and hashed (and, for
// an index, the manifests the node would use), and every blob those name
// that the node already holds challenged (see the package documentation).
// auth is presented only when it is not nil and its ServerAddress is empty
// or names the image's registry; otherwise the requests are anonymous.
// Every error is an *OriginError wrapping ErrDenied, ErrNotFound,
// ErrUnreachable, ErrNotProven or ErrInvalidReference; the Proof returned
// with an error has no Digest but tells what the attempt cost.
func (v *Verifier) Prove(ctx context.Context, image string, a *imageruntime.AuthConfig) (Proof, error) {
	t, err := parseTarget(image)
	if err != nil {
		return Proof{}, err
	}
	logger := klog.FromContext(ctx).WithValues("registry", t.registry, "repository", t.repository, "reference", t.reference)
	cred, ok := credentialFor(t.registry, a)
	if !ok {
		oe := t.fail(ErrDenied, 0, errUnusableAuth)
		logger.V(2).Info("Origin verification refused before asking", "err", oe)
		return Proof{}, oe
	}
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, v.timeout)
		defer cancel()
	}
	s := v.newSession(t, cred)
	got, oe := s.prove(s.scoped(ctx))
	proof := s.cost()
	if oe != nil {
		oe.Message = truncate(printable(scrub(oe.Message, append(secretsOf(a), s.x.sentSecrets()...))), maxMessageBytes)
		logger.V(2).Info("Origin did not accept the pull", "credentialSent", s.credentialSent, "err", oe)
		return proof, oe
	}
	proof.Digest = got
	logger.V(3).Info("Origin accepted the pull", "credentialSent", s.credentialSent, "digest", got,
		"manifests", proof.Manifests, "blobsChallenged", proof.BlobsChallenged, "blobsFetched", proof.BlobsFetched,
		"bytesFetched", proof.BytesFetched, "requests", proof.Requests)
	return proof, nil
}

// cost is the Proof's accounting so far.
func (s *session) cost() Proof {
	return Proof{
		Manifests:       s.manifests,
		BlobsChallenged: s.blobsChallenged,
		BlobsFetched:    s.blobsFetched,
		BytesFetched:    s.x.bytes.Load(),
		Requests:        int(s.x.requests.Load()),
	}
}

// prove fetches the manifest the image names, checks its digest and walks
// it; it returns the verified digest.
func (s *session) prove(ctx context.Context) (string, *OriginError) {
	resp, oe := s.get(ctx, "/manifests/"+s.t.reference, manifestAccept)
	if oe != nil {
		return "", oe
	}
	if resp.StatusCode != http.StatusOK {
		return "", s.answerFailure(resp, "")
	}
	header := resp.Header.Get("Docker-Content-Digest")
	mediaType := resp.Header.Get("Content-Type")
	what := "manifest " + short(s.t.reference)
	body, over, oe := s.readAtMost(ctx, resp, maxManifestBytes, what)
	if oe != nil {
		return "", oe
	}
	s.manifests++
	if over {
		return "", s.notProven(http.StatusOK, what, fmt.Sprintf("the manifest is over %d bytes", maxManifestBytes))
	}
	verified := digest.FromBytes(body) // sha256, for a tag
	if s.t.digest != "" {
		want, err := digest.Parse(s.t.digest)
		if err != nil {
			return "", s.t.fail(ErrInvalidReference, 0, "unsupported digest: "+err.Error())
		}
		if got := want.Algorithm().FromBytes(body); got != want {
			if len(body) == 0 {
				return "", s.notProven(http.StatusOK, what, "the registry answered 200 without the manifest's bytes")
			}
			return "", s.notProven(http.StatusOK, what, "the served bytes hash to "+short(got))
		}
		verified = want
	}
	if header != "" {
		named, err := digest.Parse(header)
		if err != nil {
			return "", s.notProven(http.StatusOK, what, fmt.Sprintf("the registry answered digest %q, which is not a digest", truncate(printable(header), 80)))
		}
		if got := named.Algorithm().FromBytes(body); got != named {
			return "", s.notProven(http.StatusOK, what, "the registry answered digest "+short(named)+" for bytes that hash to "+short(digest.FromBytes(body)))
		}
	}
	if oe := s.walk(ctx, verified, body, mediaType, 0); oe != nil {
		return "", oe
	}
	return verified.String(), nil
}
