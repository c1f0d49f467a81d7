package imagecache_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// stockKubelet models a running stock kubelet's view of the records: the
// pull manager over a cache that listed the directory once at start-up and
// is authoritative from then on, as upstream's is. (A stock kubelet writes
// without a lock; this model only reads, so it opens the store read-only.)
type stockKubelet struct {
	store *fsstore.Store
	cache *memstore.Cache
	pulls *pullmanager.PullManager
}

func startStockKubelet(t *testing.T, ctx context.Context, dir string, rt *cri.ImageService) *stockKubelet {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	store, err := fsstore.New(logger, dir, fsstore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cache, err := memstore.NewCache(logger, store)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.Authoritative() {
		t.Fatal("the kubelet's cache is not authoritative after start-up")
	}
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		t.Fatal(err)
	}
	pulls, err := pullmanager.NewImagePullManager(ctx, cache, policy, rt)
	if err != nil {
		t.Fatal(err)
	}
	return &stockKubelet{store: store, cache: cache, pulls: pulls}
}

// podWithoutCredentials is a pod of another tenant: no pull secret.
func podWithoutCredentials() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
	return nil, nil, nil
}

// TestCRIDirectPrivatePullBesideStockKubeletLeaks is why a standalone image
// cache (the pullrecords command's "cache run") refuses private images.
//
// A running stock kubelet never sees a record another process writes: its
// cache turned authoritative at start-up and answers "not found" without
// reading the disk. So an image another process pulls through the CRI with
// tenant A's secret, and records correctly, looks preloaded to the kubelet,
// and under the default policy NeverVerifyPreloadedImages a pod of any tenant,
// without credentials, may use it until the kubelet restarts.
func TestCRIDirectPrivatePullBesideStockKubeletLeaks(t *testing.T) {
	ctx := context.Background()
	logger, _ := ktesting.NewTestContext(t)
	dir := t.TempDir()
	// One node's container runtime, shared by the kubelet and the other
	// process: critest's fake, through the cri client.
	fake := critest.NewImageService()
	rt, err := cri.Dial(ctx, fake.Serve(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	const image = "registry.example/tenant-a/app:1"

	// The directory exists (the kubelet ran before); the kubelet starts.
	if s, err := fsstore.New(logger, dir, fsstore.WithoutSync()); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	kubelet := startStockKubelet(t, ctx, dir, rt)

	// Another process pulls the private image through the CRI and records
	// it, as an in-process image cache would: the writable store holds the
	// lock (the stock kubelet takes none).
	other, err := fsstore.New(logger, dir, fsstore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherCache, err := memstore.NewCache(logger, other)
	if err != nil {
		t.Fatal(err)
	}
	otherPulls, err := pullmanager.NewImagePullManager(ctx, otherCache, alwaysVerify{}, rt)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan imagecache.CacheStatus, 1)
	m, err := imagecache.New(logger, rt, otherPulls, imagecache.WithStatusHandler(func(s imagecache.CacheStatus) { done <- s }))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = m.Run(runCtx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	secret := &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "uid-a", Username: "robot", Password: "s3cret"}
	if err := m.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "warm", Images: []string{image}, PullSecret: secret}); err != nil {
		t.Fatal(err)
	}
	if st := <-done; st.Counts[imagecache.StatusSucceeded] != 1 {
		t.Fatalf("private pull: %+v", st.Results)
	}
	imageRef := fake.Image(image).GetId()

	// The record is on disk, for tenant A's secret only.
	rec, ok, err := other.GetImagePulledRecord(imageRef)
	if err != nil || !ok || len(rec.CredentialMapping) != 1 {
		t.Fatalf("record on disk = %+v, %t, %v", rec, ok, err)
	}

	// The running kubelet does not see it ...
	if _, ok, err := kubelet.cache.GetImagePulledRecord(imageRef); ok || err != nil {
		t.Fatalf("the running kubelet's cache found the record (%t, %v); the leak this test documents is gone", ok, err)
	}
	// ... so the image looks preloaded, and a pod without credentials may
	// use tenant A's private image: the leak.
	must, err := kubelet.pulls.MustAttemptImagePull(ctx, image, imageRef, podWithoutCredentials)
	if err != nil {
		t.Fatal(err)
	}
	if must {
		t.Fatal("the running kubelet makes a pod without credentials pull; the leak this test documents is gone")
	}
	t.Logf("LEAK: a running stock kubelet lets a pod without credentials use %s, pulled beside it with tenant A's secret", image)

	// Only a restart reads the record: then the same pod must pull.
	other.Close()
	restarted := startStockKubelet(t, ctx, dir, rt)
	must, err = restarted.pulls.MustAttemptImagePull(ctx, image, imageRef, podWithoutCredentials)
	if err != nil || !must {
		t.Fatalf("after a restart: must pull = %t, %v; want true", must, err)
	}

	// Hence a standalone image cache refuses the private cache outright ...
	standalone, err := imagecache.NewStandalone(logger, rt)
	if err != nil {
		t.Fatal(err)
	}
	err = standalone.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "warm", Images: []string{image}, PullSecret: secret})
	if !errors.Is(err, imagecache.ErrPrivateImage) {
		t.Fatalf("standalone Apply of a private cache = %v, want ErrPrivateImage", err)
	}
	// ... and an anonymous pull beside the kubelet leaks nothing: every pod
	// could pull that image itself.
}

// alwaysVerify is a policy for a manager that only records.
type alwaysVerify struct{}

func (alwaysVerify) RequireCredentialVerificationForImage(string, bool) bool { return true }
