package crishim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Credential kinds, the values of Admission.Credential.
const (
	CredentialPod       = "pod"       // the credential the kubelet sent with the pull
	CredentialNode      = "node"      // the node's own credential for the registry
	CredentialAnonymous = "anonymous" // none
)

// PodSecretName is the secret name recorded for a pod's CRI credential: the
// CRI request carries the credential, not the secret it came from.
const PodSecretName = "cri-pull-auth"

// Verifier asks an image's origin registry (never a mirror) whether auth
// (nil: anonymous) may pull image, and returns the manifest digest the
// origin resolved it to. *originverify.Verifier implements it.
type Verifier interface {
	Verify(ctx context.Context, image string, auth *imageruntime.AuthConfig) (digest string, err error)
}

// LocalDigest returns the digest under which the runtime already holds
// image, if it does.
type LocalDigest func(ctx context.Context, image string) (digest string, ok bool)

// Config is what NewGate needs. Records, Stamps and Verifier are required.
type Config struct {
	// Records are the shim's own pull records (never the kubelet's
	// directory): every admitted verification and successful pull is
	// recorded there.
	Records *pullmanager.PullManager
	// Stamps remember verifications for TTL.
	Stamps *credstamp.Store
	// Verifier checks at the origin.
	Verifier Verifier
	// TTL is how long a verification is remembered; it must be positive.
	TTL time.Duration
	// Node holds the node's own credentials, used when a pull carries none.
	// Nil means none.
	Node *NodeCredentials
	// MirrorOnly lists registry hosts ("host" or "host:port"; Docker Hub's
	// names are one) that have no reachable origin: pulls from them are
	// admitted without a check and recorded nowhere.
	MirrorOnly []string
	// Local finds the digest of an image the runtime holds, so a tag
	// reference can be answered from a stamp. Nil: only digest references
	// are.
	Local LocalDigest
	// Runtime is asked by Pull what the runtime holds after a pull, and
	// takes back the names a refused pull created. Nil: Pull checks only
	// what the request names (a digest reference is pulled as proved; a
	// tag reference is not checked after the pull).
	Runtime Runtime
	// Store is the accessor Records keeps its records in (the cache in
	// front of the store: recordsdir.Records.Accessor). Pull reads it to
	// tell whether content is held from a pull made with a pod's
	// credential and whether a verified pull made a name. Required when
	// MirrorOnly is not empty.
	Store accessor.PullRecordsAccessor
	// Clock times origin requests; the real clock when nil. (The stamps'
	// clock is the Store's.)
	Clock clock.PassiveClock
	// Metrics may be nil.
	Metrics *Metrics
	// Classify names the result of a verifier error for metrics and logs;
	// nil means every error is "denied" except a context's end
	// ("unreachable"). See ClassifyBySentinels.
	Classify func(error) Result
}

// Admission is an admitted pull.
type Admission struct {
	// Digest is the digest the origin accepted (or the remembered one);
	// empty for a mirror-only registry.
	Digest string
	// Credential is the kind of credential checked: CredentialPod,
	// CredentialNode or CredentialAnonymous.
	Credential string
	// Remembered is true when a fresh stamp admitted the pull without
	// asking the origin.
	Remembered bool
	// MirrorOnly is true when the registry is mirror-only: nothing was
	// checked.
	MirrorOnly bool
}

// Gate admits a runtime's PullImage calls only after the image's origin
// registry accepted the request's credential. It is safe for concurrent
// use.
type Gate struct {
	cfg        Config
	classify   func(error) Result
	mirrorOnly map[string]struct{}
	flights    flightGroup
	// images and hashes spare the remembered path a parse and a hash.
	images memo[string, parsedImage]
	hashes memo[imageruntime.AuthConfig, string]
}

// NewGate checks cfg and returns a Gate.
func NewGate(cfg Config) (*Gate, error) {
	switch {
	case cfg.Records == nil:
		return nil, fmt.Errorf("%w: Config.Records is nil", ErrMissingDependency)
	case cfg.Stamps == nil:
		return nil, fmt.Errorf("%w: Config.Stamps is nil", ErrMissingDependency)
	case cfg.Verifier == nil:
		return nil, fmt.Errorf("%w: Config.Verifier is nil", ErrMissingDependency)
	case cfg.TTL <= 0:
		return nil, fmt.Errorf("%w: TTL %v: want a positive duration", ErrInvalidConfig, cfg.TTL)
	}
	g := &Gate{cfg: cfg, classify: cfg.Classify, mirrorOnly: make(map[string]struct{}, len(cfg.MirrorOnly))}
	if g.cfg.Clock == nil {
		g.cfg.Clock = clock.RealClock{}
	}
	if g.classify == nil {
		g.classify = defaultClassify
	}
	for _, h := range cfg.MirrorOnly {
		host := imageruntime.RegistryHost(h)
		if host == "" {
			return nil, fmt.Errorf("%w: mirror-only host %q names no host", ErrInvalidConfig, h)
		}
		g.mirrorOnly[host] = struct{}{}
	}
	if len(g.mirrorOnly) > 0 && cfg.Store == nil {
		return nil, fmt.Errorf("%w: Config.Store is nil: mirror-only registries need it to keep private content out", ErrMissingDependency)
	}
	return g, nil
}

// credential is the credential a pull is checked with.
type credential struct {
	kind string
	key  string // the stamps' Key.Credential
	hash string // imageruntime.CredentialHash of auth; "" for anonymous
	auth *imageruntime.AuthConfig
}

// credentialFor picks the pod's credential if the request has one, else the
// node's for host, else none.
func (g *Gate) credentialFor(req Request, host string) credential {
	if req.Auth != nil {
		h, _ := g.hashes.get(*req.Auth, hashCredential)
		return credential{kind: CredentialPod, key: h, hash: h, auth: req.Auth}
	}
	if nc, ok := g.cfg.Node.forHost(host); ok {
		return credential{kind: CredentialNode, key: nc.key, hash: nc.hash, auth: nc.auth}
	}
	return credential{kind: CredentialAnonymous, key: CredentialAnonymous}
}

// records returns the credentials a pull with c is recorded with: the
// pod's secret for a pod credential, node-wide access otherwise (the node's
// credential and no credential are available to every pod).
func (c credential) records(pod Pod) *accessor.ImagePullCredentials {
	if c.kind != CredentialPod {
		return &accessor.ImagePullCredentials{NodePodsAccessible: true}
	}
	return &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{{
		UID:            pod.UID,
		Namespace:      pod.Namespace,
		Name:           PodSecretName,
		CredentialHash: c.hash,
	}}}
}

// Admit decides whether the runtime may pull req.Image for req.Pod:
//
//  1. an image that does not parse is refused;
//  2. a mirror-only registry is admitted unchecked;
//  3. the credential is the pod's, else the node's for the registry, else
//     none;
//  4. if the digest is known (a digest reference, or Local) and a stamp of
//     (credential, repository, digest) is fresh, the pull is admitted from
//     memory;
//  5. otherwise the origin is asked, once for all concurrent identical
//     requests (same credential and image string). On success the
//     verification is stamped and recorded in Records; on failure the
//     error (a *RefusalError wrapping the verifier's error) names the
//     image, the registry, the pod and the reason, and nothing is stamped
//     or recorded.
//
// If ctx ends while the origin is being asked, Admit returns ctx's error
// (wrapped), not a refusal, and admits nothing.
func (g *Gate) Admit(ctx context.Context, req Request) (Admission, error) {
	logger := klog.FromContext(ctx)
	pod := klog.KRef(req.Pod.Namespace, req.Pod.Name)
	p, err := g.images.get(req.Image, parseImage)
	if err != nil {
		g.cfg.Metrics.result(ResultInvalid)
		refusal := &RefusalError{Image: req.Image, Pod: req.Pod, Err: fmt.Errorf("%w: %v", ErrInvalidImage, err)}
		logger.Info("Refused a pull", "pod", pod, "image", req.Image, "result", ResultInvalid, "err", refusal.Err)
		return Admission{}, refusal
	}
	cred := g.credentialFor(req, p.host)
	if _, ok := g.mirrorOnly[p.host]; ok {
		g.cfg.Metrics.result(ResultMirrorOnly)
		logger.V(2).Info("Admitted a pull unchecked: the registry is mirror-only", "pod", pod, "image", req.Image, "registry", p.host, "credential", cred.kind, "result", ResultMirrorOnly)
		return Admission{Credential: cred.kind, MirrorOnly: true}, nil
	}

	digest := p.digest
	if digest == "" && g.cfg.Local != nil {
		if d, ok := g.cfg.Local(ctx, req.Image); ok {
			digest = d
		}
	}
	if digest != "" && g.cfg.Stamps.Fresh(credstamp.Key{Credential: cred.key, Repository: p.repository, Digest: digest}, g.cfg.TTL) {
		g.cfg.Metrics.rememberedHit()
		if v := logger.V(2); v.Enabled() {
			v.Info("Admitted a pull: the origin accepted this credential within the TTL", "pod", pod, "image", req.Image, "registry", p.host, "credential", cred.kind, "result", ResultAccepted, "remembered", true)
		}
		return Admission{Digest: digest, Credential: cred.kind, Remembered: true}, nil
	}

	known := digest
	v, joined, err := g.flights.do(ctx, cred.key+"\x00"+req.Image, func(ctx context.Context) (verdict, error) {
		// A flight for this key that ended between the check above and
		// this one's start has stamped its verification already.
		if known != "" && g.cfg.Stamps.Fresh(credstamp.Key{Credential: cred.key, Repository: p.repository, Digest: known}, g.cfg.TTL) {
			return verdict{digest: known, remembered: true}, nil
		}
		d, err := g.verifyAndStamp(ctx, req.Image, p, cred)
		return verdict{digest: d}, err
	})
	if err != nil {
		if ctx.Err() != nil {
			logger.Info("Gave up waiting for the origin check", "pod", pod, "image", req.Image, "registry", p.host, "credential", cred.kind, "err", ctx.Err())
			return Admission{}, fmt.Errorf("checking %q at the origin registry %s for pod %s: %w", req.Image, p.host, req.Pod, ctx.Err())
		}
		result := g.classify(err)
		g.cfg.Metrics.result(result)
		logger.Info("Refused a pull", "pod", pod, "image", req.Image, "registry", p.host, "credential", cred.kind, "result", result, "shared", joined, "err", err)
		return Admission{}, &RefusalError{Image: req.Image, Registry: p.host, Pod: req.Pod, Err: err}
	}
	if v.remembered {
		g.cfg.Metrics.rememberedHit()
		logger.V(2).Info("Admitted a pull: the origin accepted this credential within the TTL", "pod", pod, "image", req.Image, "registry", p.host, "credential", cred.kind, "result", ResultAccepted, "remembered", true, "shared", joined)
		return Admission{Digest: v.digest, Credential: cred.kind, Remembered: true}, nil
	}
	digest = v.digest
	g.cfg.Records.RecordImagePulled(ctx, req.Image, p.repository+"@"+digest, cred.records(req.Pod))
	g.cfg.Metrics.result(ResultAccepted)
	logger.Info("Admitted a pull: the origin accepted the credential", "pod", pod, "image", req.Image, "registry", p.host, "credential", cred.kind, "result", ResultAccepted, "digest", digest, "shared", joined)
	return Admission{Digest: digest, Credential: cred.kind}, nil
}

// verifyAndStamp asks the origin and, on success, stamps the verification
// (a failed stamp is logged: the pull is still admitted, and the next one
// asks again).
func (g *Gate) verifyAndStamp(ctx context.Context, image string, p parsedImage, cred credential) (string, error) {
	start := g.cfg.Clock.Now()
	digest, err := g.cfg.Verifier.Verify(ctx, image, cred.auth)
	g.cfg.Metrics.originRequest(g.cfg.Clock.Since(start))
	if err != nil {
		return "", err
	}
	switch {
	case digest == "":
		return "", errors.New("the verifier accepted the pull but returned no digest")
	case p.digest != "" && digest != p.digest:
		return "", fmt.Errorf("the origin resolved %q to another digest, %s", image, digest)
	}
	k := credstamp.Key{Credential: cred.key, Repository: p.repository, Digest: digest}
	if err := g.cfg.Stamps.Stamp(k); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to remember an origin verification; the next pull asks again", "image", image, "registry", p.host, "credential", cred.kind)
	}
	return digest, nil
}

// PullSucceeded records that the runtime pulled req.Image as imageRef, with
// the same credentials Admit checked, so the shim's records list the pull
// under the runtime's own image reference. Call it only after Admit admitted
// req and the runtime's pull succeeded. A mirror-only registry's pulls,
// which nothing checked, are not recorded.
func (g *Gate) PullSucceeded(ctx context.Context, req Request, imageRef string) {
	if imageRef == "" {
		return
	}
	p, err := g.images.get(req.Image, parseImage)
	if err != nil {
		return
	}
	if _, ok := g.mirrorOnly[p.host]; ok {
		return
	}
	cred := g.credentialFor(req, p.host)
	g.cfg.Records.RecordImagePulled(ctx, req.Image, imageRef, cred.records(req.Pod))
}
