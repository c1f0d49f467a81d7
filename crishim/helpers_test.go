package crishim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// errDenied and errNotFound stand in for originverify's sentinels.
var (
	errDenied   = errors.New("origin denied the credential")
	errNotFound = errors.New("origin has no such manifest")
)

// testContext carries a logger that discards everything.
func testContext(t testing.TB) context.Context {
	return klog.NewContext(t.Context(), logr.Discard())
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	digest1  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digest2  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	privRepo = "registry.example.com/team/app"
)

// grant is one (credential, repository) the fake origin accepts, and the
// digest its tag resolves to.
type grant struct {
	cred string // imageruntime.CredentialHash of the auth, or "" for anonymous
	repo string
}

// fakeVerifier is the origin: it accepts only the granted (credential,
// repository) pairs, and of a repository only the one granted digest, counts its calls, and blocks while block is non-nil
// and open.
type fakeVerifier struct {
	mu     sync.Mutex
	grants map[grant]string // → the tag's digest
	block  chan struct{}
	calls  atomic.Int64
	// cancelled counts calls whose context ended while blocked.
	cancelled atomic.Int64
}

func newFakeVerifier() *fakeVerifier { return &fakeVerifier{grants: make(map[grant]string)} }

func (f *fakeVerifier) allow(auth *imageruntime.AuthConfig, repo, digest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants[grant{credOf(auth), repo}] = digest
}

func credOf(auth *imageruntime.AuthConfig) string {
	if auth == nil {
		return ""
	}
	return imageruntime.CredentialHash(*auth)
}

func (f *fakeVerifier) Verify(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			f.cancelled.Add(1)
			return "", ctx.Err()
		}
	}
	p, err := parseImage(image)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	d, ok := f.grants[grant{credOf(auth), p.repository}]
	f.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("%w: registry %s answered 401 for %s", errDenied, p.host, p.repository)
	}
	if p.digest != "" && p.digest != d {
		return "", fmt.Errorf("%w: registry %s answered 404 for %s@%s", errNotFound, p.host, p.repository, p.digest)
	}
	return d, nil
}

type noImages struct{}

func (noImages) ListImages(context.Context) ([]imageruntime.Image, error) { return nil, nil }

// fixture is a gate over real stores in a temporary directory.
type fixture struct {
	gate      *Gate
	verifier  *fakeVerifier
	stamps    *credstamp.Store
	stampsDir string
	records   *memstore.Cache
	clock     *testingclock.FakeClock
	metrics   *Metrics
}

func newFixture(t testing.TB, edit func(*Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	logger := logr.Discard()
	dir := t.TempDir()
	disk, err := fsstore.New(logger, dir, fsstore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disk.Close() })
	cache, err := memstore.NewCache(logger, disk)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.AlwaysVerify, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(t0)
	manager, err := pullmanager.NewImagePullManager(ctx, cache, policy, noImages{}, pullmanager.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	stampsDir := filepath.Join(dir, "verified")
	stamps, err := credstamp.Open(logger, stampsDir, credstamp.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stamps.Close() })
	f := &fixture{verifier: newFakeVerifier(), stamps: stamps, stampsDir: stampsDir, records: cache, clock: clk, metrics: NewMetrics()}
	cfg := Config{
		Records:  manager,
		Store:    cache,
		Stamps:   stamps,
		Verifier: f.verifier,
		TTL:      time.Hour,
		Clock:    clk,
		Metrics:  f.metrics,
		Classify: ClassifyBySentinels(errDenied, errNotFound, nil, nil, nil),
	}
	if edit != nil {
		edit(&cfg)
	}
	f.gate, err = NewGate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) record(t testing.TB, imageRef string) *accessor.ImagePulledRecord {
	t.Helper()
	r, ok, err := f.records.GetImagePulledRecord(imageRef)
	if err != nil {
		t.Fatalf("GetImagePulledRecord(%s): %v", imageRef, err)
	}
	if !ok {
		return nil
	}
	return r
}

var (
	tenantA = Pod{Namespace: "tenant-a", Name: "app-1", UID: "uid-a"}
	tenantB = Pod{Namespace: "tenant-b", Name: "app-2", UID: "uid-b"}
	authA   = &imageruntime.AuthConfig{Username: "alice", Password: "alice-secret-pw", ServerAddress: "registry.example.com"}
	authB   = &imageruntime.AuthConfig{Username: "bob", Password: "bob-secret-pw", ServerAddress: "registry.example.com"}
)

type verifierFunc func(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error)

func (f verifierFunc) Verify(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	return f(ctx, image, auth)
}

func credstampKeyFor(cred, repo, digest string) credstamp.Key {
	return credstamp.Key{Credential: cred, Repository: repo, Digest: digest}
}

func credstampKey(auth *imageruntime.AuthConfig, digest string) credstamp.Key {
	return credstampKeyFor(imageruntime.CredentialHash(*auth), privRepo, digest)
}

// authKey is the stamps' credential for a pod credential.
func authKey(auth *imageruntime.AuthConfig) string { return imageruntime.CredentialHash(*auth) }
