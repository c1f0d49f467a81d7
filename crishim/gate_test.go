package crishim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
)

func TestNewGateChecksConfig(t *testing.T) {
	f := newFixture(t, nil)
	good := f.gate.cfg
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want error
	}{
		{"no records", func(c *Config) { c.Records = nil }, ErrMissingDependency},
		{"no stamps", func(c *Config) { c.Stamps = nil }, ErrMissingDependency},
		{"no verifier", func(c *Config) { c.Verifier = nil }, ErrMissingDependency},
		{"zero ttl", func(c *Config) { c.TTL = 0 }, ErrInvalidConfig},
		{"empty mirror", func(c *Config) { c.MirrorOnly = []string{"https://"} }, ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			if _, err := NewGate(cfg); !errors.Is(err, tc.want) {
				t.Errorf("NewGate = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAdmitAsksTheOriginThenRemembers(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testContext(t)
	f.verifier.allow(authA, privRepo, digest1)
	req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}

	got, err := f.gate.Admit(ctx, req)
	if err != nil {
		t.Fatalf("first Admit: %v", err)
	}
	if want := (Admission{Digest: digest1, Credential: CredentialPod}); got != want {
		t.Errorf("first Admit = %+v, want %+v", got, want)
	}
	if n := f.verifier.calls.Load(); n != 1 {
		t.Errorf("first Admit made %d origin requests, want 1", n)
	}
	got, err = f.gate.Admit(ctx, req)
	if err != nil {
		t.Fatalf("second Admit: %v", err)
	}
	if want := (Admission{Digest: digest1, Credential: CredentialPod, Remembered: true}); got != want {
		t.Errorf("second Admit = %+v, want %+v", got, want)
	}
	if n := f.verifier.calls.Load(); n != 1 {
		t.Errorf("a remembered Admit asked the origin (%d requests in all)", n)
	}
	if got := testutil.ToFloat64(f.metrics.byResult[ResultAccepted]); got != 2 {
		t.Errorf("%s{result=accepted} = %v, want 2", MetricVerificationsTotal, got)
	}
	if got := testutil.ToFloat64(f.metrics.remembered); got != 1 {
		t.Errorf("%s = %v, want 1", MetricRememberedTotal, got)
	}
	if got := testutil.CollectAndCount(f.metrics.originSeconds); got != 1 {
		t.Errorf("%s: %d series, want 1", MetricOriginRequestSeconds, got)
	}
}

// A tag reference is answered from a stamp only through the runtime's own
// digest (Config.Local).
func TestAdmitTagUsesLocalDigest(t *testing.T) {
	local := map[string]string{}
	f := newFixture(t, func(c *Config) {
		c.Local = func(_ context.Context, image string) (string, bool) {
			d, ok := local[image]
			return d, ok
		}
	})
	ctx := testContext(t)
	f.verifier.allow(authA, privRepo, digest1)
	req := Request{Image: privRepo + ":v1", Auth: authA, Pod: tenantA}
	if a, err := f.gate.Admit(ctx, req); err != nil || a.Digest != digest1 || a.Remembered {
		t.Fatalf("first Admit = %+v, %v; want digest %s, not remembered", a, err, digest1)
	}
	// Not yet held by the runtime: no digest, so the origin is asked.
	if a, err := f.gate.Admit(ctx, req); err != nil || a.Remembered {
		t.Fatalf("second Admit without a local digest = %+v, %v; want asked again", a, err)
	}
	if n := f.verifier.calls.Load(); n != 2 {
		t.Errorf("origin requests = %d, want 2", n)
	}
	local[req.Image] = digest1
	if a, err := f.gate.Admit(ctx, req); err != nil || !a.Remembered {
		t.Fatalf("Admit with the runtime's digest = %+v, %v; want remembered", a, err)
	}
	// The runtime holds other content under the tag: not remembered.
	local[req.Image] = digest2
	f.verifier.allow(authA, privRepo, digest2)
	if a, err := f.gate.Admit(ctx, req); err != nil || a.Remembered {
		t.Fatalf("Admit with another local digest = %+v, %v; want asked again", a, err)
	}
	if n := f.verifier.calls.Load(); n != 3 {
		t.Errorf("origin requests = %d, want 3", n)
	}
}

// A credential verified for repository A at digest d1 admits nothing else.
func TestStampAdmitsOnlyWhatWasVerified(t *testing.T) {
	otherRepo := "registry.example.com/team/other"
	node, err := ParseNodeCredentials([]byte(`{"auths":{"registry.example.com":{"username":"node","password":"node-secret-pw"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Node = node })
	ctx := testContext(t)
	f.verifier.allow(authA, privRepo, digest1)
	if _, err := f.gate.Admit(ctx, Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}); err != nil {
		t.Fatalf("verifying tenant A: %v", err)
	}
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"another repository, same digest", Request{Image: otherRepo + "@" + digest1, Auth: authA, Pod: tenantA}},
		{"same repository, another digest", Request{Image: privRepo + "@" + digest2, Auth: authA, Pod: tenantA}},
		{"another credential", Request{Image: privRepo + "@" + digest1, Auth: authB, Pod: tenantB}},
		{"no credential: node's", Request{Image: privRepo + "@" + digest1, Pod: tenantB}},
		{"the same repository on another registry", Request{Image: "mirror.example.com/team/app@" + digest1, Auth: authA, Pod: tenantA}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.verifier.calls.Load()
			a, err := f.gate.Admit(ctx, tc.req)
			if err == nil {
				t.Fatalf("Admit = %+v, nil; want a refusal", a)
			}
			if !(errors.Is(err, errDenied) || errors.Is(err, errNotFound)) || !errors.Is(err, ErrRefused) {
				t.Errorf("Admit error %v does not wrap the origin's answer and ErrRefused", err)
			}
			if n := f.verifier.calls.Load() - before; n != 1 {
				t.Errorf("Admit made %d origin requests, want 1 (it must ask, not remember)", n)
			}
		})
	}
	// Anonymous (no pod credential, no node credential for the registry).
	f2 := newFixture(t, nil)
	f2.verifier.allow(authA, privRepo, digest1)
	if _, err := f2.gate.Admit(ctx, Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}); err != nil {
		t.Fatal(err)
	}
	if a, err := f2.gate.Admit(ctx, Request{Image: privRepo + "@" + digest1, Pod: tenantB}); err == nil {
		t.Errorf("anonymous Admit after tenant A's verification = %+v, nil; want refused", a)
	}
	if n := f2.verifier.calls.Load(); n != 2 {
		t.Errorf("origin requests = %d, want 2", n)
	}
}

func TestExpiredStampAsksAgain(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testContext(t)
	f.verifier.allow(authA, privRepo, digest1)
	req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}
	if _, err := f.gate.Admit(ctx, req); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(59 * time.Minute)
	if a, err := f.gate.Admit(ctx, req); err != nil || !a.Remembered {
		t.Fatalf("Admit within the TTL = %+v, %v; want remembered", a, err)
	}
	f.clock.Step(time.Minute)
	// The credential was revoked meanwhile: after the TTL the origin says so.
	f.verifier.mu.Lock()
	clear(f.verifier.grants)
	f.verifier.mu.Unlock()
	if a, err := f.gate.Admit(ctx, req); !errors.Is(err, errDenied) {
		t.Fatalf("Admit at the TTL after revocation = %+v, %v; want the origin's denial", a, err)
	}
	if n := f.verifier.calls.Load(); n != 2 {
		t.Errorf("origin requests = %d, want 2", n)
	}
	// A clock set back does not revive the stamp either.
	f.clock.SetTime(t0.Add(-time.Minute))
	if a, err := f.gate.Admit(ctx, req); err == nil {
		t.Errorf("Admit with the clock before the stamp = %+v, nil; want asked and refused", a)
	}
}

func TestRefusalIsNeverRemembered(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testContext(t)
	req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}
	for i := range 2 {
		_, err := f.gate.Admit(ctx, req)
		var refusal *RefusalError
		if !errors.As(err, &refusal) || !errors.Is(err, errDenied) {
			t.Fatalf("Admit %d = %v; want a *RefusalError wrapping the denial", i, err)
		}
		msg := err.Error()
		for _, want := range []string{req.Image, "registry.example.com", "tenant-a/app-1", "401"} {
			if !strings.Contains(msg, want) {
				t.Errorf("refusal %q does not name %q", msg, want)
			}
		}
		for _, secret := range []string{authA.Password, imageruntime.CredentialHash(*authA)} {
			if strings.Contains(msg, secret) {
				t.Errorf("refusal %q holds a secret", msg)
			}
		}
	}
	if n := f.verifier.calls.Load(); n != 2 {
		t.Errorf("origin requests = %d, want 2 (a refusal is asked again)", n)
	}
	if r := f.record(t, privRepo+"@"+digest1); r != nil {
		t.Errorf("a refused pull was recorded: %+v", r)
	}
	if got := testutil.ToFloat64(f.metrics.byResult[ResultDenied]); got != 2 {
		t.Errorf("%s{result=denied} = %v, want 2", MetricVerificationsTotal, got)
	}
}

func TestOriginDigestMismatchIsRefused(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Verifier = verifierFunc(func(context.Context, string, *imageruntime.AuthConfig) (string, error) { return digest2, nil })
	})
	_, err := f.gate.Admit(testContext(t), Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Admit when the origin resolves a digest reference to another digest = %v; want refused", err)
	}
	if f.stamps.Fresh(credstampKey(authA, digest1), time.Hour) || f.stamps.Fresh(credstampKey(authA, digest2), time.Hour) {
		t.Errorf("a refused verification was stamped")
	}
}

func TestInvalidImageIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.gate.Admit(testContext(t), Request{Image: "UPPER/Case:tag", Pod: tenantA})
	if !errors.Is(err, ErrInvalidImage) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Admit of an unparsable image = %v; want ErrInvalidImage", err)
	}
	if n := f.verifier.calls.Load(); n != 0 {
		t.Errorf("an unparsable image reached the origin")
	}
	if got := testutil.ToFloat64(f.metrics.byResult[ResultInvalid]); got != 1 {
		t.Errorf("%s{result=invalid} = %v, want 1", MetricVerificationsTotal, got)
	}
}

func TestMirrorOnlyAdmitsWithoutAsking(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MirrorOnly = []string{"https://index.docker.io/v1/", "Local.Registry:5000"} })
	ctx := testContext(t)
	for _, image := range []string{"busybox:1.36", "docker.io/library/busybox@" + digest1, "local.registry:5000/x/y:z"} {
		req := Request{Image: image, Auth: authA, Pod: tenantA}
		a, err := f.gate.Admit(ctx, req)
		if err != nil || a != (Admission{Credential: CredentialPod, MirrorOnly: true}) {
			t.Errorf("Admit(%s) = %+v, %v; want mirror-only", image, a, err)
		}
		f.gate.PullSucceeded(ctx, req, "sha256:"+strings.Repeat("9", 64))
	}
	if n := f.verifier.calls.Load(); n != 0 {
		t.Errorf("mirror-only registries were asked %d times", n)
	}
	if r := f.record(t, "sha256:"+strings.Repeat("9", 64)); r != nil {
		t.Errorf("an unchecked mirror-only pull was recorded: %+v", r)
	}
	// Another port is another registry.
	if _, err := f.gate.Admit(ctx, Request{Image: "local.registry:5001/x/y:z", Pod: tenantA}); err == nil {
		t.Errorf("a registry on another port was treated as mirror-only")
	}
}

func TestAdmitRecords(t *testing.T) {
	node, err := ParseNodeCredentials([]byte(`{"auths":{"node.example.com":{"username":"node","password":"node-secret-pw"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Node = node })
	ctx := testContext(t)
	f.verifier.allow(authA, privRepo, digest1)
	req := Request{Image: privRepo + ":v1", Auth: authA, Pod: tenantA}
	if _, err := f.gate.Admit(ctx, req); err != nil {
		t.Fatal(err)
	}
	imageID := "sha256:" + strings.Repeat("a", 64)
	f.gate.PullSucceeded(ctx, req, imageID)
	wantPod := map[string]accessor.ImagePullCredentials{privRepo: {KubernetesSecrets: []accessor.ImagePullSecret{{
		UID: "uid-a", Namespace: "tenant-a", Name: PodSecretName, CredentialHash: imageruntime.CredentialHash(*authA),
	}}}}
	for _, ref := range []string{privRepo + "@" + digest1, imageID} {
		r := f.record(t, ref)
		if r == nil {
			t.Fatalf("no record for %s", ref)
		}
		if diff := cmp.Diff(wantPod, r.CredentialMapping); diff != "" {
			t.Errorf("record %s (-want +got):\n%s", ref, diff)
		}
	}

	nodeAuth := node.For("node.example.com/base/img:1")
	f.verifier.allow(nodeAuth, "node.example.com/base/img", digest2)
	nodeReq := Request{Image: "node.example.com/base/img:1", Pod: tenantB}
	a, err := f.gate.Admit(ctx, nodeReq)
	if err != nil || a.Credential != CredentialNode {
		t.Fatalf("Admit with the node's credential = %+v, %v", a, err)
	}
	r := f.record(t, "node.example.com/base/img@"+digest2)
	if r == nil {
		t.Fatal("no record of the node-credential pull")
	}
	if diff := cmp.Diff(map[string]accessor.ImagePullCredentials{"node.example.com/base/img": {NodePodsAccessible: true}}, r.CredentialMapping); diff != "" {
		t.Errorf("node-credential record (-want +got):\n%s", diff)
	}
	// The node's credential is stamped under "node:"+hash, not as a pod's.
	if f.stamps.Fresh(credstampKeyFor(imageruntime.CredentialHash(*nodeAuth), "node.example.com/base/img", digest2), time.Hour) {
		t.Errorf("the node's credential vouches as a pod credential with the same hash")
	}
	if !f.stamps.Fresh(credstampKeyFor("node:"+imageruntime.CredentialHash(*nodeAuth), "node.example.com/base/img", digest2), time.Hour) {
		t.Errorf("the node's verification was not stamped under node:<hash>")
	}
}
