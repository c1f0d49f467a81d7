package kubeletadapter_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dockerref "github.com/distribution/reference"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/credentialprovider"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/images"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/kubeletadapter"
)

// cacheRuntime is the kubelet's image service in memory for the image
// cache tests: a registry listed in passwords refuses a pull without a
// credential or with another password (as a runtime reports a registry's
// 401, in a gRPC status), and every pull is logged with the credential it
// carried.
type cacheRuntime struct {
	mu        sync.Mutex
	images    map[string]bool   // image IDs present
	passwords map[string]string // registry -> the one password it takes
	pulls     []string          // "image user:password", or "image anonymous"
	// block, when set, makes PullImage wait for its context and send the
	// image on entered first.
	block   bool
	entered chan string
}

var _ kubecontainer.ImageService = (*cacheRuntime)(nil)

func newCacheRuntime() *cacheRuntime {
	return &cacheRuntime{images: map[string]bool{}, passwords: map[string]string{}, entered: make(chan string, 10)}
}

func cacheImageID(image string) string {
	content := image
	if named, err := dockerref.ParseNormalizedNamed(image); err == nil {
		content = dockerref.TagNameOnly(named).String()
	}
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (f *cacheRuntime) PullImage(ctx context.Context, image kubecontainer.ImageSpec, creds []credentialprovider.TrackedAuthConfig, _ *runtimeapi.PodSandboxConfig) (string, *credentialprovider.TrackedAuthConfig, error) {
	f.mu.Lock()
	who := "anonymous"
	if len(creds) > 0 {
		who = creds[0].Username + ":" + creds[0].Password
	}
	f.pulls = append(f.pulls, image.Image+" "+who)
	block := f.block
	f.mu.Unlock()
	if block {
		f.entered <- image.Image
		<-ctx.Done()
		return "", nil, status.Error(codes.Canceled, ctx.Err().Error())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	named, err := dockerref.ParseNormalizedNamed(image.Image)
	if err != nil {
		return "", nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if want, private := f.passwords[dockerref.Domain(named)]; private {
		refused := status.Error(codes.Unknown, "failed to resolve reference: 401 Unauthorized")
		switch {
		case len(creds) == 0:
			return "", nil, refused
		case creds[0].Password != want:
			// The kubelet's runtime manager aggregates the errors of the
			// credentials it tried; the code alone says what happened.
			return "", nil, utilerrors.NewAggregate([]error{status.Error(codes.PermissionDenied, "access to the repository refused")})
		}
	}
	id := cacheImageID(image.Image)
	f.images[id] = true
	var used *credentialprovider.TrackedAuthConfig
	if len(creds) > 0 {
		used = &creds[0]
	}
	return id, used, nil
}

func (f *cacheRuntime) GetImageRef(_ context.Context, image kubecontainer.ImageSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id := cacheImageID(image.Image); f.images[id] {
		return id, nil
	}
	return "", nil
}

func (f *cacheRuntime) has(image string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[cacheImageID(image)]
}

func (f *cacheRuntime) takePulls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pulls
	f.pulls = nil
	return p
}

func (f *cacheRuntime) ListImages(context.Context) ([]kubecontainer.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []kubecontainer.Image
	for id := range f.images {
		out = append(out, kubecontainer.Image{ID: id})
	}
	return out, nil
}

func (f *cacheRuntime) RemoveImage(_ context.Context, image kubecontainer.ImageSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := image.Image
	if !strings.HasPrefix(id, "sha256:") {
		id = cacheImageID(image.Image)
	}
	if !f.images[id] {
		return status.Error(codes.NotFound, "no such image")
	}
	delete(f.images, id)
	return nil
}

func (f *cacheRuntime) ImageStats(context.Context) (*kubecontainer.ImageStats, error) {
	return &kubecontainer.ImageStats{}, nil
}

func (f *cacheRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *cacheRuntime) GetImageSize(context.Context, kubecontainer.ImageSpec) (uint64, error) {
	return 0, nil
}

// cacheNode is a kubelet root whose node configuration declares a cache
// file, with the hooks the tests wait on.
type cacheNode struct {
	t         *testing.T
	root      string
	cacheFile string
	rt        *cacheRuntime
	clock     *testingclock.FakeClock
	statuses  chan imagecache.CacheStatus
	checks    chan cacheCheck
	pm        *kubeletadapter.ImagePullManager
}

type cacheCheck struct {
	res imagecache.SyncResult
	err error
}

func newCacheNode(t *testing.T, caches string) *cacheNode {
	t.Helper()
	root := t.TempDir()
	n := &cacheNode{t: t, root: root, cacheFile: filepath.Join(root, "pullrecords", "caches.yaml"), rt: newCacheRuntime(),
		clock:    testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)),
		statuses: make(chan imagecache.CacheStatus, 100), checks: make(chan cacheCheck, 100)}
	writeNodeConfig(t, root, configHeader+"imageCacheFile: "+n.cacheFile+"\n")
	if caches != "" {
		n.writeCaches(caches)
	}
	return n
}

// writeCaches replaces the cache file atomically (mode 0600), as a node
// agent would.
func (n *cacheNode) writeCaches(content string) {
	n.t.Helper()
	tmp := n.cacheFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, n.cacheFile); err != nil {
		n.t.Fatal(err)
	}
}

// start runs NewForKubelet over the node; the manager is closed at the end
// of the test.
func (n *cacheNode) start() (*kubeletadapter.ImagePullManager, error) {
	n.t.Helper()
	policy, err := upstream.NewImagePullCredentialVerificationPolicy(kubeletconfig.NeverVerifyPreloadedImages, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(n.t, ktesting.NewConfig()))
	pm, err := kubeletadapter.NewForKubelet(ctx, n.root, policy, n.rt, 0, intentCacheSize, recordsCacheSize,
		kubeletadapter.WithRegisterer(prometheus.NewRegistry()), kubeletadapter.WithStoreOptions(fsstore.WithoutSync()),
		kubeletadapter.WithImageCacheTestHooks(n.clock,
			func(s imagecache.CacheStatus) { n.statuses <- s },
			func(res imagecache.SyncResult, err error) { n.checks <- cacheCheck{res, err} }))
	if pm != nil {
		n.pm = pm
		n.t.Cleanup(func() {
			if err := pm.Close(); err != nil {
				n.t.Error(err)
			}
		})
	}
	return pm, err
}

// waitComplete waits for the completed status of a batch of work on cache.
func (n *cacheNode) waitComplete(cache string, work imagecache.WorkType) imagecache.CacheStatus {
	n.t.Helper()
	return n.waitAll(cache + " " + string(work))[0]
}

// waitAll waits, in whatever order they come, for the completed statuses
// of batches named "namespace/name workType", and returns them in the order
// asked.
func (n *cacheNode) waitAll(batches ...string) []imagecache.CacheStatus {
	n.t.Helper()
	got := map[string]imagecache.CacheStatus{}
	for len(got) < len(batches) {
		s := <-n.statuses
		if key := s.ImageCache.String() + " " + string(s.WorkType); s.Complete && slices.Contains(batches, key) {
			got[key] = s
		}
	}
	out := make([]imagecache.CacheStatus, len(batches))
	for i, b := range batches {
		out[i] = got[b]
	}
	return out
}

// poll steps the watch loop's clock once and returns what the check did.
func (n *cacheNode) poll() cacheCheck {
	n.t.Helper()
	n.clock.Step(kubeletadapter.ImageCacheFilePollInterval)
	return <-n.checks
}

// decide runs the kubelet's own image manager (EnsureImageExists, the
// KubeletEnsureSecretPulledImages gate on) over the adapter for a pod of ns
// with secrets, and returns the error and the pulls it made.
func (n *cacheNode) decide(ns, image string, policy v1.PullPolicy, secrets ...v1.Secret) (string, []string) {
	n.t.Helper()
	backOff := flowcontrol.NewBackOff(time.Second, time.Minute)
	backOff.Clock = testingclock.NewFakeClock(time.Unix(0, 0))
	manager := images.NewImageManager(record.NewFakeRecorder(100), &credentialprovider.BasicDockerKeyring{}, n.rt, n.pm, backOff, true, nil, 0, 0, noopTimeRecorder{})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", UID: types.UID(ns + "-p")}}
	ref := &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", FieldPath: "spec.containers{c}"}
	sandbox := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: ns, Uid: string(pod.UID)}}
	n.rt.takePulls() // the cache's own pulls are asserted separately
	_, _, err := manager.EnsureImageExists(context.Background(), ref, pod, image, secrets, sandbox, "", policy)
	pulls := n.rt.takePulls()
	if err != nil {
		return err.Error(), pulls
	}
	return "", pulls
}

const (
	privateImage = "registry.private.example/team-a/app:1"
	publicImage  = "registry.public.example/tools/shell:1"
	tenantSecret = `
  pullSecret:
    namespace: team-a
    name: regcred
    uid: uid-regcred
    username: user
    password: team-a-password
`
)

// A private image declared with a tenant's secret is pulled in process with
// that credential and recorded for that secret alone: a pod holding the
// secret uses it without a pull; a pod without it, or with another secret
// (of its namespace, or another namespace's of the same name), must pull,
// which the registry refuses without the right password.
func TestImageCachePrivateImageOnlyForTheSecret(t *testing.T) {
	enableGate(t)
	n := newCacheNode(t, "- namespace: team-a\n  name: warm\n  images: ["+privateImage+"]\n"+tenantSecret)
	n.rt.passwords["registry.private.example"] = "team-a-password"
	if _, err := n.start(); err != nil {
		t.Fatal(err)
	}
	if s := n.waitComplete("team-a/warm", imagecache.WorkTypeCreate); s.Counts[imagecache.StatusSucceeded] != 1 {
		t.Fatalf("create: %v, want 1 succeeded", s.Counts)
	}
	if got, want := n.rt.takePulls(), []string{privateImage + " user:team-a-password"}; !cmp.Equal(got, want) {
		t.Errorf("the cache pulled %q, want %q", got, want)
	}
	if !n.rt.has(privateImage) {
		t.Fatal("the image is not on the node")
	}

	holder := dockerSecret("team-a", "regcred", "uid-regcred", "registry.private.example", "team-a-password")
	if err, pulls := n.decide("team-a", privateImage, v1.PullNever, holder); err != "" || len(pulls) != 0 {
		t.Errorf("pod holding the secret, Never: err %q pulls %q; want the cached image used", err, pulls)
	}
	if err, pulls := n.decide("team-a", privateImage, v1.PullIfNotPresent, holder); err != "" || len(pulls) != 0 {
		t.Errorf("pod holding the secret, IfNotPresent: err %q pulls %q; want no pull", err, pulls)
	}
	if err, _ := n.decide("team-b", privateImage, v1.PullNever); !strings.Contains(err, "ErrImageNeverPull") {
		t.Errorf("pod without the secret, Never: err %q; want ErrImageNeverPull", err)
	}
	if err, pulls := n.decide("team-b", privateImage, v1.PullIfNotPresent); !strings.Contains(err, "ErrImagePull") || len(pulls) != 1 {
		t.Errorf("pod without the secret, IfNotPresent: err %q pulls %q; want one refused pull (ErrImagePull)", err, pulls)
	}
	for name, other := range map[string]v1.Secret{
		"another secret of the namespace":             dockerSecret("team-a", "othercred", "uid-othercred", "registry.private.example", "other-password"),
		"another namespace's secret of the same name": dockerSecret("team-b", "regcred", "uid-team-b", "registry.private.example", "team-b-password"),
	} {
		if err, _ := n.decide(other.Namespace, privateImage, v1.PullNever, other); !strings.Contains(err, "ErrImageNeverPull") {
			t.Errorf("pod with %s, Never: err %q; want ErrImageNeverPull", name, err)
		}
		if err, pulls := n.decide(other.Namespace, privateImage, v1.PullIfNotPresent, other); !strings.Contains(err, "ErrImagePull") || len(pulls) != 1 {
			t.Errorf("pod with %s, IfNotPresent: err %q pulls %q; want one refused pull (ErrImagePull)", name, err, pulls)
		}
	}

	// The adapter's MustAttemptImagePull, asked directly, agrees.
	ref := cacheImageID(privateImage)
	hash := imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "user", Password: "team-a-password"})
	for _, tc := range []struct {
		name    string
		secrets []kubeletconfig.ImagePullSecret
		want    bool
	}{
		{"the secret", []kubeletconfig.ImagePullSecret{{UID: "uid-regcred", Namespace: "team-a", Name: "regcred", CredentialHash: hash}}, false},
		{"no secret", nil, true},
		{"another secret", []kubeletconfig.ImagePullSecret{{UID: "uid-x", Namespace: "team-a", Name: "othercred", CredentialHash: "0000"}}, true},
		{"the secret's name and namespace, another uid and content", []kubeletconfig.ImagePullSecret{{UID: "uid-x", Namespace: "team-a", Name: "regcred", CredentialHash: "0000"}}, true},
		// The kubelet's rules, kept: the same credential content under other
		// coordinates, or the same secret (namespace, name, UID) rotated,
		// counts as holding it.
		{"the same content elsewhere", []kubeletconfig.ImagePullSecret{{UID: "uid-y", Namespace: "team-c", Name: "copy", CredentialHash: hash}}, false},
		{"the secret rotated", []kubeletconfig.ImagePullSecret{{UID: "uid-regcred", Namespace: "team-a", Name: "regcred", CredentialHash: "1111"}}, false},
	} {
		got, err := n.pm.MustAttemptImagePull(context.Background(), privateImage, ref,
			func() ([]kubeletconfig.ImagePullSecret, *kubeletconfig.ImagePullServiceAccount, error) {
				return tc.secrets, nil, nil
			})
		if err != nil || got != tc.want {
			t.Errorf("MustAttemptImagePull with %s = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// A wrong password in the cache file is the registry's refusal, reported
// Unauthorized and not retried (the kubelet's aggregate error unwrapped and
// classified by cri's rules), the password in no message; nothing is
// recorded, so no pod may use the image without pulling.
func TestImageCacheWrongPasswordIsUnauthorized(t *testing.T) {
	enableGate(t)
	n := newCacheNode(t, "- namespace: team-a\n  name: warm\n  images: ["+privateImage+"]\n"+tenantSecret)
	n.rt.passwords["registry.private.example"] = "the-real-one"
	if _, err := n.start(); err != nil {
		t.Fatal(err)
	}
	s := n.waitComplete("team-a/warm", imagecache.WorkTypeCreate)
	if len(s.Results) != 1 {
		t.Fatalf("results %+v, want one", s.Results)
	}
	r := s.Results[0]
	if r.Status != imagecache.StatusFailed || r.Reason != imagecache.ReasonUnauthorized || r.Attempts != 1 {
		t.Errorf("result %s/%s after %d attempts, want failed/%s after 1", r.Status, r.Reason, r.Attempts, imagecache.ReasonUnauthorized)
	}
	if strings.Contains(r.Message, "team-a-password") {
		t.Errorf("the message holds the password: %s", r.Message)
	}
	holder := dockerSecret("team-a", "regcred", "uid-regcred", "registry.private.example", "team-a-password")
	if err, _ := n.decide("team-a", privateImage, v1.PullNever, holder); !strings.Contains(err, "ErrImageNeverPull") {
		t.Errorf("after the refused pull, Never: err %q; want ErrImageNeverPull", err)
	}
}

// A cache without a pull secret makes its image usable by every pod on the
// node, as an anonymous pull by the kubelet does.
func TestImageCacheAnonymousImageIsNodeWide(t *testing.T) {
	enableGate(t)
	n := newCacheNode(t, "- namespace: shared\n  name: tools\n  images: ["+publicImage+"]\n")
	if _, err := n.start(); err != nil {
		t.Fatal(err)
	}
	n.waitComplete("shared/tools", imagecache.WorkTypeCreate)
	if got, want := n.rt.takePulls(), []string{publicImage + " anonymous"}; !cmp.Equal(got, want) {
		t.Errorf("the cache pulled %q, want %q", got, want)
	}
	if err, pulls := n.decide("team-b", publicImage, v1.PullNever); err != "" || len(pulls) != 0 {
		t.Errorf("any pod, Never: err %q pulls %q; want the cached image used", err, pulls)
	}
}

// A cache file that is missing, invalid, or not a regular file keeps the
// kubelet from starting, naming the file, before the records are opened.
func TestImageCacheBadFileFailsStart(t *testing.T) {
	enableGate(t)
	for name, tc := range map[string]struct {
		setup func(n *cacheNode)
		is    error
	}{
		"missing": {func(*cacheNode) {}, fs.ErrNotExist},
		"invalid": {func(n *cacheNode) {
			n.writeCaches("- namespace: team-a\n  name: warm\n  images: [" + privateImage + "]\n  pullSecret: {namespace: team-a, name: regcred, username: u, password: p}\n")
		}, imagecache.ErrInvalidCacheFile},
		"not YAML": {func(n *cacheNode) { n.writeCaches("- [") }, imagecache.ErrInvalidCacheFile},
		"symbolic link": {func(n *cacheNode) {
			target := filepath.Join(n.root, "elsewhere.yaml")
			if err := os.WriteFile(target, []byte("{namespace: a, name: b, images: [x]}"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, n.cacheFile); err != nil {
				t.Fatal(err)
			}
		}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCacheNode(t, "")
			tc.setup(n)
			pm, err := n.start()
			if err == nil || pm != nil {
				t.Fatalf("NewForKubelet = %v, %v; want an error", pm, err)
			}
			if !errors.Is(err, kubeletadapter.ErrImageCache) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("err %v does not match ErrImageCache and %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), n.cacheFile) {
				t.Errorf("err %q does not name %s", err, n.cacheFile)
			}
			if _, statErr := os.Lstat(filepath.Join(n.root, fsstore.DirName)); !os.IsNotExist(statErr) {
				t.Errorf("the records directory was touched (%v)", statErr)
			}
		})
	}
}

// An edit of the file adds and removes caches (the dropped cache's image is
// purged); an invalid edit changes nothing and the applied caches stay; a
// good edit after it applies again.
func TestImageCacheFileEdits(t *testing.T) {
	enableGate(t)
	n := newCacheNode(t, "- namespace: shared\n  name: tools\n  images: ["+publicImage+"]\n")
	if _, err := n.start(); err != nil {
		t.Fatal(err)
	}
	n.waitComplete("shared/tools", imagecache.WorkTypeCreate)
	if c := n.poll(); c.err != nil || c.res.Changed() {
		t.Errorf("unchanged file: %+v, want nothing done", c)
	}

	other := "registry.public.example/tools/other:2"
	n.writeCaches("- namespace: shared\n  name: other\n  images: [" + other + "]\n")
	c := n.poll()
	want := imagecache.SyncResult{Applied: []imagecache.CacheRef{{Namespace: "shared", Name: "other"}},
		Deleted: []imagecache.CacheRef{{Namespace: "shared", Name: "tools"}}}
	if c.err != nil || !cmp.Equal(c.res, want) {
		t.Fatalf("edit: %+v, want %+v", c, want)
	}
	n.waitAll("shared/other create", "shared/tools delete")
	if !n.rt.has(other) || n.rt.has(publicImage) {
		t.Errorf("after the edit: %s present %v, %s present %v; want only the new one", other, n.rt.has(other), publicImage, n.rt.has(publicImage))
	}

	n.writeCaches("- namespace: shared\n  name: other\n  images: [Not An Image]\n")
	if c := n.poll(); !errors.Is(c.err, imagecache.ErrInvalidCacheFile) || c.res.Changed() {
		t.Errorf("invalid edit: %+v, want ErrInvalidCacheFile and nothing changed", c)
	}
	if err := os.Remove(n.cacheFile); err != nil {
		t.Fatal(err)
	}
	if c := n.poll(); !errors.Is(c.err, fs.ErrNotExist) || c.res.Changed() {
		t.Errorf("removed file: %+v, want fs.ErrNotExist and nothing changed", c)
	}
	applied, err := imagecache.LoadState(kubeletadapter.ImageCacheStateDir(n.root))
	if err != nil || len(applied) != 1 || applied[0].Ref().String() != "shared/other" || !n.rt.has(other) {
		t.Errorf("after the bad edits: applied %v (%v), image present %v; want shared/other kept", applied, err, n.rt.has(other))
	}

	n.writeCaches("- namespace: shared\n  name: other\n  images: [" + other + ", " + publicImage + "]\n")
	if c := n.poll(); c.err != nil || len(c.res.Applied) != 1 {
		t.Errorf("good edit after bad ones: %+v, want shared/other applied", c)
	}
	n.waitComplete("shared/other", imagecache.WorkTypeUpdate)
	if !n.rt.has(publicImage) {
		t.Error("the image added by the good edit was not pulled")
	}
}

// Close stops the cache and waits for it: a pull in flight is cut off and
// recorded as failed, so no intent is left behind, and the records are
// released for the next kubelet.
func TestImageCacheCloseStops(t *testing.T) {
	enableGate(t)
	n := newCacheNode(t, "- namespace: shared\n  name: tools\n  images: ["+publicImage+"]\n")
	n.rt.block = true
	pm, err := n.start()
	if err != nil {
		t.Fatal(err)
	}
	if got := <-n.rt.entered; got != publicImage {
		t.Fatalf("pull of %q, want %q", got, publicImage)
	}
	if err := pm.Close(); err != nil {
		t.Fatal(err)
	}
	s := n.waitComplete("shared/tools", imagecache.WorkTypeCreate)
	if s.Counts[imagecache.StatusUnknown] != 1 || len(s.Results) != 1 || s.Results[0].Reason != imagecache.ReasonShutDown {
		t.Errorf("after Close: %v %+v, want the pull ended unknown/ShutDown", s.Counts, s.Results)
	}
	pulling, err := os.ReadDir(filepath.Join(n.root, fsstore.DirName, "pulling"))
	if err != nil || len(pulling) != 0 {
		t.Errorf("intents left after Close: %v (%v)", pulling, err)
	}
	store, err := fsstore.New(klog.Background(), n.root)
	if err != nil {
		t.Fatalf("the records are still held after Close: %v", err)
	}
	store.Close()
	applied, err := imagecache.LoadState(kubeletadapter.ImageCacheStateDir(n.root))
	if err != nil || len(applied) != 1 {
		t.Errorf("state after Close: %v, %v; want shared/tools kept for the next start", applied, err)
	}
}

func TestImageCacheStateDir(t *testing.T) {
	if got, want := kubeletadapter.ImageCacheStateDir("/var/lib/kubelet"), "/var/lib/kubelet/pullrecords/imagecache"; got != want {
		t.Errorf("ImageCacheStateDir = %q, want %q", got, want)
	}
}
