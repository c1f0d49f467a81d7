//go:build e2e

package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// testTimeout bounds each test's calls and waits after its set-up.
const testTimeout = 3 * time.Minute

// testContext returns a context with the test's logger and a deadline.
func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// await waits for ch to be closed or to deliver, failing the test when ctx
// ends first.
func await[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
		var zero T
		return zero
	}
}

// node is one "kubelet": a CRI connection, a kubelet-format record store and
// a pull manager over them.
type node struct {
	env        *env
	cri        *cri.ImageService
	kubeletDir string
	store      *fsstore.Store
	pulls      *pullmanager.PullManager
}

func newNode(t *testing.T, ctx context.Context, e *env, kubeletDir string) *node {
	t.Helper()
	svc, err := cri.Dial(ctx, e.containerd.CRIEndpoint)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return newNodeOn(t, ctx, e, svc, kubeletDir)
}

func newNodeOn(t *testing.T, ctx context.Context, e *env, svc *cri.ImageService, kubeletDir string) *node {
	t.Helper()
	store, err := fsstore.New(klog.FromContext(ctx), kubeletDir, fsstore.WithoutSync())
	if err != nil {
		t.Fatalf("fsstore.New: %v", err)
	}
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := pullmanager.NewImagePullManager(ctx, store, policy, svc)
	if err != nil {
		t.Fatalf("NewImagePullManager: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return &node{env: e, cri: svc, kubeletDir: kubeletDir, store: store, pulls: pm}
}

// requireAbsent fails the test if the runtime has one of the images: every
// test starts on a containerd of its own, with nothing pulled.
func (n *node) requireAbsent(t *testing.T, ctx context.Context, images ...string) {
	t.Helper()
	for _, img := range images {
		if st, err := n.cri.ImageStatus(ctx, img); err != nil || st != nil {
			t.Fatalf("ImageStatus(%s) on a new containerd = %+v, %v; want absent", img, st, err)
		}
	}
}

func (n *node) auth() *imageruntime.AuthConfig {
	return &imageruntime.AuthConfig{Username: n.env.user, Password: n.env.pass}
}

func podCreds(secrets ...accessor.ImagePullSecret) pullmanager.GetPodCredentials {
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return secrets, nil, nil
	}
}

func (e *env) secretHash() string {
	return imageruntime.CredentialHash(imageruntime.AuthConfig{Username: e.user, Password: e.pass})
}

func TestTenantIsolationOnAPrivateImage(t *testing.T) {
	e := startEnv(t)
	ctx := testContext(t)
	n := newNode(t, ctx, e, t.TempDir())
	image := e.privateImages[0]
	n.requireAbsent(t, ctx, image)
	secretA := accessor.ImagePullSecret{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: e.secretHash()}

	// Tenant A: the kubelet's flow (intent, pull with the secret, record).
	start := time.Now()
	if err := n.pulls.RecordPullIntent(klog.FromContext(ctx), image); err != nil {
		t.Fatal(err)
	}
	ref, err := n.cri.PullImage(ctx, image, n.auth())
	if err != nil {
		n.pulls.RecordImagePullFailed(ctx, image)
		t.Fatalf("tenant A pull: %v", err)
	}
	n.pulls.RecordImagePulled(ctx, image, ref, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{secretA}})
	t.Logf("tenant A pulled %s as %s in %v", image, ref, time.Since(start))

	rec, ok, err := n.store.GetImagePulledRecord(ref)
	if err != nil || !ok {
		t.Fatalf("pulled record for %s: ok=%t err=%v", ref, ok, err)
	}
	var found bool
	for _, c := range rec.CredentialMapping {
		for _, s := range c.KubernetesSecrets {
			found = found || s == secretA
		}
	}
	if !found {
		t.Errorf("record %+v does not name tenant A's secret", rec)
	}
	if intents, err := n.store.ListImagePullIntents(); err != nil || len(intents) != 0 {
		t.Errorf("intents after the pull: %v, %v", intents, err)
	}

	// Tenant A's own pod may use it.
	if must, err := n.pulls.MustAttemptImagePull(ctx, image, ref, podCreds(secretA)); err != nil || must {
		t.Errorf("tenant A: MustAttemptImagePull = %t, %v; want false", must, err)
	}

	// Tenant B without credentials must pull, and the registry refuses it.
	if must, err := n.pulls.MustAttemptImagePull(ctx, image, ref, podCreds()); err != nil || !must {
		t.Errorf("tenant B without credentials: MustAttemptImagePull = %t, %v; want true", must, err)
	}
	_, err = n.cri.PullImage(ctx, image, nil)
	if !errors.Is(err, cri.ErrUnauthorized) || cri.IsTransient(err) {
		t.Errorf("anonymous pull of the private image = %v; want a permanent ErrUnauthorized", err)
	}
	// The image cache manager reads the same error without importing cri.
	if !imagecache.IsUnauthorized(err) || imagecache.IsTransient(err) {
		t.Errorf("imagecache classifies %v as unauthorized=%t transient=%t; want unauthorized, permanent",
			err, imagecache.IsUnauthorized(err), imagecache.IsTransient(err))
	}
	if err != nil && strings.Contains(err.Error(), e.pass) {
		t.Errorf("error contains the registry password")
	}
	t.Logf("anonymous pull refused: %v", err)

	// Tenant B with another secret of the same content: no pull.
	secretB := accessor.ImagePullSecret{UID: "uid-b", Namespace: "tenant-b", Name: "copy", CredentialHash: e.secretHash()}
	if must, err := n.pulls.MustAttemptImagePull(ctx, image, ref, podCreds(secretB)); err != nil || must {
		t.Errorf("tenant B with the same secret content: MustAttemptImagePull = %t, %v; want false", must, err)
	}
	// A secret with other content must pull.
	secretC := accessor.ImagePullSecret{UID: "uid-c", Namespace: "tenant-b", Name: "other",
		CredentialHash: imageruntime.CredentialHash(imageruntime.AuthConfig{Username: e.user, Password: "wrong"})}
	if must, err := n.pulls.MustAttemptImagePull(ctx, image, ref, podCreds(secretC)); err != nil || !must {
		t.Errorf("tenant B with another credential: MustAttemptImagePull = %t, %v; want true", must, err)
	}
}

// collector gathers what an imagecache manager reports.
type collector struct {
	mu       sync.Mutex
	results  []imagecache.ImageWorkResult
	statuses chan imagecache.CacheStatus
	onResult func(imagecache.ImageWorkResult)
}

func newCollector() *collector {
	return &collector{statuses: make(chan imagecache.CacheStatus, 32)}
}

func (c *collector) options() []imagecache.Option {
	return []imagecache.Option{
		imagecache.WithResultHandler(func(r imagecache.ImageWorkResult) {
			c.mu.Lock()
			c.results = append(c.results, r)
			f := c.onResult
			c.mu.Unlock()
			if f != nil {
				f(r)
			}
		}),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) { c.statuses <- s }),
	}
}

// wait returns the next batch's status; it fails the test if none comes
// within 2 minutes or before ctx ends.
func (c *collector) wait(t *testing.T, ctx context.Context) imagecache.CacheStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return await(t, ctx, c.statuses, "an image cache batch to complete")
}

func startManager(t *testing.T, ctx context.Context, n *node, images imagecache.ImageService, stateDir string, c *collector, opts ...imagecache.Option) (stop func()) {
	t.Helper()
	all := append([]imagecache.Option{
		imagecache.WithStateDir(stateDir),
		imagecache.WithNode("e2e-node", "containerd://1.6"),
		imagecache.WithRetries(20, 200*time.Millisecond, 2*time.Second),
		imagecache.WithRequestTimeout(time.Minute),
	}, c.options()...)
	m, err := imagecache.New(klog.FromContext(ctx), images, n.pulls, append(all, opts...)...)
	if err != nil {
		t.Fatalf("imagecache.New: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	managers.Store(t.Name(), m)
	return stop
}

var managers sync.Map

func manager(t *testing.T) *imagecache.Manager {
	m, _ := managers.Load(t.Name())
	return m.(*imagecache.Manager)
}

func TestAnonymousCachedImageIsUsableByEveryPodAndPurge(t *testing.T) {
	e := startEnv(t)
	ctx := testContext(t)
	n := newNode(t, ctx, e, t.TempDir())
	image := e.publicImages[0]
	n.requireAbsent(t, ctx, image)
	c := newCollector()
	startManager(t, ctx, n, n.cri, t.TempDir(), c)
	m := manager(t)

	if err := m.Apply(ctx, imagecache.ImageCache{Namespace: "ops", Name: "warm", Images: []string{image}}); err != nil {
		t.Fatal(err)
	}
	st := c.wait(t, ctx)
	if st.Counts[imagecache.StatusSucceeded] != 1 {
		t.Fatalf("create = %+v", st)
	}
	r := st.Results[0]
	t.Logf("imagecache pulled %s as %s in %v (batch %v)", image, r.ImageRef, r.Duration, st.Duration)

	for _, pod := range []struct {
		name  string
		creds pullmanager.GetPodCredentials
	}{
		{"pod without credentials", podCreds()},
		{"pod with some secret", podCreds(accessor.ImagePullSecret{UID: "u", Namespace: "x", Name: "y", CredentialHash: "z"})},
	} {
		if must, err := n.pulls.MustAttemptImagePull(ctx, image, r.ImageRef, pod.creds); err != nil || must {
			t.Errorf("%s: MustAttemptImagePull = %t, %v; want false", pod.name, must, err)
		}
	}

	// A refresh finds it present and recorded.
	if err := m.Refresh(ctx, "ops", "warm"); err != nil {
		t.Fatal(err)
	}
	if st := c.wait(t, ctx); st.Counts[imagecache.StatusAlreadyPulled] != 1 {
		t.Errorf("refresh = %+v", st)
	}

	// Purge: deleting the cache removes the image and its record.
	if err := m.Delete(ctx, "ops", "warm"); err != nil {
		t.Fatal(err)
	}
	st = c.wait(t, ctx)
	if st.WorkType != imagecache.WorkTypeDelete || st.Counts[imagecache.StatusSucceeded] != 1 || st.Results[0].Reason != imagecache.ReasonRemoved {
		t.Fatalf("delete = %+v", st)
	}
	if img, err := n.cri.ImageStatus(ctx, image); err != nil || img != nil {
		t.Errorf("ImageStatus after purge = %+v, %v; want absent", img, err)
	}
	if _, ok, err := n.store.GetImagePulledRecord(r.ImageRef); ok || err != nil {
		t.Errorf("pulled record after purge: ok=%t err=%v", ok, err)
	}
}

func TestPrivateCacheRecordsTheSecret(t *testing.T) {
	e := startEnv(t)
	ctx := testContext(t)
	n := newNode(t, ctx, e, t.TempDir())
	image := e.privateImages[1]
	n.requireAbsent(t, ctx, image)
	c := newCollector()
	startManager(t, ctx, n, n.cri, t.TempDir(), c)
	m := manager(t)
	secret := &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "uid-a", Username: e.user, Password: e.pass}

	// Without credentials the cache fails, permanently and at once.
	if err := m.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "warm", Images: []string{image}}); err != nil {
		t.Fatal(err)
	}
	st := c.wait(t, ctx)
	if r := st.Results[0]; r.Status != imagecache.StatusFailed || r.Reason != imagecache.ReasonUnauthorized || r.Attempts != 1 {
		t.Errorf("anonymous private cache = %+v", r)
	}
	// With the secret it succeeds, and only that secret's pods may use it.
	if err := m.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "warm", Images: []string{image}, PullSecret: secret}); err != nil {
		t.Fatal(err)
	}
	st = c.wait(t, ctx)
	r := st.Results[0]
	if r.Status != imagecache.StatusSucceeded {
		t.Fatalf("private cache = %+v", r)
	}
	t.Logf("imagecache pulled private %s in %v", image, r.Duration)
	a := accessor.ImagePullSecret{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: e.secretHash()}
	if must, err := n.pulls.MustAttemptImagePull(ctx, image, r.ImageRef, podCreds(a)); err != nil || must {
		t.Errorf("tenant A pod: must=%t err=%v, want false", must, err)
	}
	if must, err := n.pulls.MustAttemptImagePull(ctx, image, r.ImageRef, podCreds()); err != nil || !must {
		t.Errorf("pod without credentials: must=%t err=%v, want true", must, err)
	}
}

// gatedImages wraps the CRI image service so the test can act just before a
// pull of a chosen image starts, and see how it ended.
type gatedImages struct {
	*cri.ImageService
	mu    sync.Mutex
	gates map[string]*gate
}

type gate struct {
	reached chan struct{} // closed when the pull is about to start
	proceed chan struct{} // the test closes it to let the pull go on
	result  chan error    // the pull's error (nil on success)
}

func (g *gatedImages) gate(image string) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := &gate{reached: make(chan struct{}), proceed: make(chan struct{}), result: make(chan error, 1)}
	g.gates[image] = gt
	return gt
}

func (g *gatedImages) PullImage(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	g.mu.Lock()
	gt := g.gates[image]
	delete(g.gates, image)
	g.mu.Unlock()
	if gt == nil {
		return g.ImageService.PullImage(ctx, image, auth)
	}
	close(gt.reached)
	select {
	case <-gt.proceed:
	case <-ctx.Done():
		gt.result <- ctx.Err()
		return "", ctx.Err()
	}
	ref, err := g.ImageService.PullImage(ctx, image, auth)
	gt.result <- err
	return ref, err
}

func TestRestartsInTheMiddleOfAnApply(t *testing.T) {
	e := startEnv(t)
	ctx := testContext(t)
	kubeletDir, stateDir := t.TempDir(), t.TempDir()
	n := newNode(t, ctx, e, kubeletDir)
	images := append([]string{e.privateImages[2]}, e.publicImages[1:6]...)
	n.requireAbsent(t, ctx, images...)
	secret := &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "uid-a", Username: e.user, Password: e.pass}
	cache := imagecache.ImageCache{Namespace: "tenant-a", Name: "big", Images: images, PullSecret: secret}

	g := &gatedImages{ImageService: n.cri, gates: map[string]*gate{}}
	containerdGate := g.gate(images[1])
	managerGate := g.gate(images[3])
	c1 := newCollector()
	stop1 := startManager(t, ctx, n, g, stateDir, c1, imagecache.WithWorkers(1))
	m1 := manager(t)
	began := time.Now()
	if err := m1.Apply(ctx, cache); err != nil {
		t.Fatal(err)
	}

	// containerd goes away just as the second pull starts, and comes back.
	await(t, ctx, containerdGate.reached, "the second pull to start")
	if err := e.containerd.StopDaemon(); err != nil {
		t.Fatalf("stopping containerd: %v", err)
	}
	close(containerdGate.proceed)
	err := await(t, ctx, containerdGate.result, "the pull against the stopped containerd")
	if err == nil || !cri.IsTransient(err) || !imagecache.IsTransient(err) {
		t.Errorf("pull against the stopped containerd = %v, want a transient error (cri and imagecache)", err)
	}
	t.Logf("pull while containerd was down: %v", err)
	restart := time.Now()
	if err := e.containerd.StartDaemon(ctx); err != nil {
		t.Fatalf("starting containerd again: %v", err)
	}
	t.Logf("containerd started again in %v", time.Since(restart))

	// The manager goes away while the fourth pull is about to start.
	await(t, ctx, managerGate.reached, "the fourth pull to start")
	stop1()
	close(managerGate.proceed)
	first := c1.wait(t, ctx)
	t.Logf("first manager: %d requests, counts %v, %v", first.Requests, first.Counts, first.Duration)
	if first.Requests != len(images) || len(first.Results) != len(images) {
		t.Fatalf("first manager lost results: %+v", first)
	}
	done := map[string]bool{}
	for _, r := range first.Results {
		switch {
		case r.Status == imagecache.StatusSucceeded:
			done[r.Request.Image] = true
			if r.Request.Image == images[1] && r.Attempts < 2 {
				t.Errorf("the pull cut off by the containerd restart succeeded after %d attempt(s), want a retry", r.Attempts)
			}
		case r.Status == imagecache.StatusUnknown && r.Reason == imagecache.ReasonShutDown:
		default:
			t.Errorf("%s: %s/%s (%s), want succeeded or unknown/ShutDown", r.Request.Image, r.Status, r.Reason, r.Message)
		}
	}
	if !done[images[0]] || done[images[3]] {
		t.Errorf("first manager finished %v; want the first image and not the fourth", done)
	}
	if intents, err := n.store.ListImagePullIntents(); err != nil || len(intents) != 0 {
		t.Errorf("intents left by the first manager: %v, %v", intents, err)
	}

	// A new kubelet and a new image cache manager on the same directories:
	// the first kubelet's store is closed, as its death would release the
	// directory's writer lock.
	if err := n.store.Close(); err != nil {
		t.Fatal(err)
	}
	ctx2 := testContext(t)
	n2 := newNodeOn(t, ctx2, e, n.cri, kubeletDir)
	c2 := newCollector()
	startManager(t, ctx2, n2, n2.cri, stateDir, c2, imagecache.WithWorkers(2))
	second := c2.wait(t, ctx2)
	t.Logf("resumed: %d requests, counts %v, %v; whole apply across both restarts %v", second.Requests, second.Counts, second.Duration, time.Since(began))
	if second.WorkType != imagecache.WorkTypeCreate || second.Requests != len(images) {
		t.Errorf("resumed batch = %+v", second)
	}
	for _, r := range second.Results {
		want := imagecache.StatusSucceeded
		if done[r.Request.Image] {
			want = imagecache.StatusAlreadyPulled
		}
		if r.Status != want {
			t.Errorf("resumed %s: %s/%s (%s), want %s", r.Request.Image, r.Status, r.Reason, r.Message, want)
		}
	}
	if intents, err := n2.store.ListImagePullIntents(); err != nil || len(intents) != 0 {
		t.Errorf("intents left behind: %v, %v", intents, err)
	}
	a := accessor.ImagePullSecret{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: e.secretHash()}
	for _, img := range images {
		st, err := n2.cri.ImageStatus(ctx2, img)
		if err != nil || st == nil {
			t.Errorf("%s not present after resume: %v", img, err)
			continue
		}
		if must, err := n2.pulls.MustAttemptImagePull(ctx2, img, st.ID, podCreds(a)); err != nil || must {
			t.Errorf("%s: tenant A pod must pull (%v)", img, err)
		}
		if must, err := n2.pulls.MustAttemptImagePull(ctx2, img, st.ID, podCreds()); err != nil || !must {
			t.Errorf("%s: pod without credentials may use tenant A's image (%v)", img, err)
		}
	}
}
