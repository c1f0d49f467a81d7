package kubeletadapter_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	dockerref "github.com/distribution/reference"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/credentialprovider"
	"k8s.io/kubernetes/pkg/features"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/images"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/kubeletadapter"
	"github.com/pullrecords/pullrecords/memstore"
)

// The three ways of putting a pull manager under the kubelet's real image
// manager that the tests compare.
type wiring string

const (
	// kubelet: the kubelet's own manager, cache and fs accessor, built as
	// kuberuntime_manager.go builds them.
	kubelet wiring = "kubelet"
	// library: this library through kubeletadapter.NewForKubelet.
	library wiring = "library"
	// mixed: the kubelet's manager over this library's store and cache,
	// through kubeletadapter.ToKubelet.
	mixed wiring = "mixed"
)

var wirings = []wiring{kubelet, library, mixed}

// The kubelet's sizes with default maxPods 110 and serialised pulls.
const (
	maxPods          = 110
	intentCacheSize  = 2 * maxPods
	recordsCacheSize = 5 * maxPods
)

func enableGate(t *testing.T) {
	t.Helper()
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.KubeletEnsureSecretPulledImages, true)
}

// newPullManager builds the pull manager of wiring w over dir, the way a
// kubelet (or a fork patched as README.md shows) would.
// The returned function stops it (closes what it opened), as a kubelet
// exiting would.
func newPullManager(t *testing.T, ctx context.Context, w wiring, dir string, rt kubecontainer.ImageService, policy kubeletconfig.ImagePullCredentialsVerificationPolicy, allowlist []string, extra ...kubeletadapter.Option) (upstream.ImagePullManager, func()) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	enforcer, err := upstream.NewImagePullCredentialVerificationPolicy(policy, allowlist)
	if err != nil {
		t.Fatal(err)
	}
	switch w {
	case kubelet:
		fs, err := upstream.NewFSPullRecordsAccessor(logger, dir)
		if err != nil {
			t.Fatal(err)
		}
		cache := upstream.NewCachedPullRecordsAccessor(logger, fs, intentCacheSize, recordsCacheSize, 0)
		m, err := upstream.NewImagePullManager(ctx, cache, enforcer, rt, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m, func() {}
	case library:
		m, err := kubeletadapter.NewForKubelet(ctx, dir, enforcer, rt, 0, intentCacheSize, recordsCacheSize,
			append([]kubeletadapter.Option{kubeletadapter.WithRegisterer(prometheus.NewRegistry()), kubeletadapter.WithStoreOptions(fsstore.WithoutSync())}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		stop := func() {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		}
		return m, sync.OnceFunc(stop)
	case mixed:
		store, err := fsstore.New(logger, dir, fsstore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		stop := sync.OnceFunc(func() {
			if err := store.Close(); err != nil {
				t.Error(err)
			}
		})
		cache, err := memstore.NewCache(logger, store)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		m, err := upstream.NewImagePullManager(ctx, kubeletadapter.ToKubelet(cache), enforcer, rt, 0)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		return m, stop
	}
	t.Fatalf("unknown wiring %q", w)
	return nil, nil
}

// fakeRuntime is a container runtime's image service: image IDs are derived
// from the normalised repository name (so busybox, docker.io/busybox and
// docker.io/library/busybox are one image, as in a real runtime), or set
// with alias to make two names share content.
type fakeRuntime struct {
	mu     sync.Mutex
	images map[string]kubecontainer.Image // by ID
	alias  map[string]string              // normalised name -> content name
	pulls  []string                       // every PullImage, as "image with creds"
	// private registries refuse anonymous pulls.
	private map[string]bool
	// revoked passwords are refused by every registry (a credential the
	// registry no longer accepts).
	revoked map[string]bool
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{images: map[string]kubecontainer.Image{}, alias: map[string]string{}, private: map[string]bool{}, revoked: map[string]bool{}}
}

var _ kubecontainer.ImageService = (*fakeRuntime)(nil)

func (f *fakeRuntime) idOf(image string) string {
	named, err := dockerref.ParseNormalizedNamed(image)
	content := image
	if err == nil {
		content = dockerref.TagNameOnly(named).String()
	}
	if a, ok := f.alias[content]; ok {
		content = a
	}
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// preload puts image on the node as if loaded out of band.
func (f *fakeRuntime) preload(image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.add(image)
}

func (f *fakeRuntime) add(image string) string {
	id := f.idOf(image)
	img := f.images[id]
	img.ID = id
	if !contains(img.RepoTags, image) {
		img.RepoTags = append(img.RepoTags, image)
	}
	f.images[id] = img
	return id
}

func (f *fakeRuntime) remove(image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.images, f.idOf(image))
}

func (f *fakeRuntime) PullImage(_ context.Context, image kubecontainer.ImageSpec, creds []credentialprovider.TrackedAuthConfig, _ *runtimeapi.PodSandboxConfig) (string, *credentialprovider.TrackedAuthConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var used *credentialprovider.TrackedAuthConfig
	who := "anonymous"
	if len(creds) > 0 {
		used = &creds[0]
		if s := used.Source; s != nil && s.Secret != nil {
			who = "secret " + s.Secret.Namespace + "/" + s.Secret.Name
		} else {
			who = "node credentials"
		}
	}
	f.pulls = append(f.pulls, image.Image+" with "+who)
	if named, err := dockerref.ParseNormalizedNamed(image.Image); err == nil && f.private[dockerref.Domain(named)] && used == nil {
		return "", nil, errors.New("unauthorized: authentication required")
	}
	if used != nil && f.revoked[used.Password] {
		return "", nil, errors.New("unauthorized: incorrect username or password")
	}
	return f.add(image.Image), used, nil
}

func (f *fakeRuntime) GetImageRef(_ context.Context, image kubecontainer.ImageSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[f.idOf(image.Image)]; ok {
		return f.idOf(image.Image), nil
	}
	return "", nil
}

func (f *fakeRuntime) ListImages(context.Context) ([]kubecontainer.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]kubecontainer.Image, 0, len(f.images))
	for _, img := range f.images {
		img.RepoTags = append([]string(nil), img.RepoTags...)
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *fakeRuntime) imageIDs() []string {
	imgs, _ := f.ListImages(context.Background())
	ids := make([]string, len(imgs))
	for i, img := range imgs {
		ids[i] = img.ID
	}
	return ids
}

func (f *fakeRuntime) takePulls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pulls
	f.pulls = nil
	return p
}

func (f *fakeRuntime) RemoveImage(_ context.Context, image kubecontainer.ImageSpec) error {
	f.remove(image.Image)
	return nil
}

func (f *fakeRuntime) ImageStats(context.Context) (*kubecontainer.ImageStats, error) {
	return &kubecontainer.ImageStats{}, nil
}

func (f *fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *fakeRuntime) GetImageSize(context.Context, kubecontainer.ImageSpec) (uint64, error) {
	return 0, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type noopTimeRecorder struct{}

func (noopTimeRecorder) RecordImageStartedPulling(types.UID)  {}
func (noopTimeRecorder) RecordImageFinishedPulling(types.UID) {}

// node is one kubelet over one directory: the real image manager, a pull
// manager of some wiring, a fake runtime and an event recorder.
type node struct {
	t        *testing.T
	ctx      context.Context
	dir      string
	rt       *fakeRuntime
	policy   kubeletconfig.ImagePullCredentialsVerificationPolicy
	allow    []string
	pm       upstream.ImagePullManager
	stop     func()
	images   images.ImageManager
	recorder *record.FakeRecorder
	// extra are options the library wiring's NewForKubelet gets.
	extra []kubeletadapter.Option
}

func newNode(t *testing.T, w wiring, dir string, rt *fakeRuntime, policy kubeletconfig.ImagePullCredentialsVerificationPolicy, allow []string) *node {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	n := &node{t: t, ctx: ctx, dir: dir, rt: rt, policy: policy, allow: allow}
	n.start(w)
	return n
}

// start (re)starts the kubelet with wiring w over the same directory and
// runtime.
func (n *node) start(w wiring) {
	if n.stop != nil {
		n.stop()
	}
	n.pm, n.stop = newPullManager(n.t, n.ctx, w, n.dir, n.rt, n.policy, n.allow, n.extra...)
	n.t.Cleanup(n.stop)
	n.recorder = record.NewFakeRecorder(100)
	backOff := flowcontrol.NewBackOff(time.Second, time.Minute)
	backOff.Clock = testingclock.NewFakeClock(time.Unix(0, 0))
	n.images = images.NewImageManager(n.recorder, &credentialprovider.BasicDockerKeyring{}, n.rt, n.pm, backOff, true, nil, 0, 0, noopTimeRecorder{})
}

// pod is a pod asking for one image.
type pod struct {
	ns, name string
	image    string
	policy   v1.PullPolicy
	secrets  []v1.Secret
}

// outcome is everything observable about one EnsureImageExists.
type outcome struct {
	Step     string
	ImageRef string
	Message  string
	Err      string
	Pulls    []string
	Events   []string
}

var durations = regexp.MustCompile(`in [0-9.]+[a-zµ]*s \([0-9.]+[a-zµ]*s including waiting\)`)

func (n *node) ensure(step string, p pod) outcome {
	n.t.Helper()
	k8sPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, UID: types.UID(p.ns + "-" + p.name)}}
	ref := &v1.ObjectReference{Kind: "Pod", Namespace: p.ns, Name: p.name, FieldPath: "spec.containers{c}"}
	sandbox := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: p.ns, Uid: string(k8sPod.UID)}}
	imageRef, msg, err := n.images.EnsureImageExists(n.ctx, ref, k8sPod, p.image, p.secrets, sandbox, "", p.policy)
	o := outcome{Step: step, ImageRef: imageRef, Message: durations.ReplaceAllString(msg, "in D"), Pulls: n.rt.takePulls()}
	if err != nil {
		o.Err = err.Error()
	}
	for {
		select {
		case e := <-n.recorder.Events:
			o.Events = append(o.Events, durations.ReplaceAllString(e, "in D"))
			continue
		default:
		}
		break
	}
	return o
}

// dockerSecret is a kubernetes.io/dockerconfigjson secret for registry.
func dockerSecret(ns, name, uid, registry, password string) v1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte("user:" + password))
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, registry, auth)
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(cfg)},
	}
}

var lastUpdated = regexp.MustCompile(`"lastUpdatedTime":"[^"]*"`)

// files returns the record files under dir's image_manager, by path,
// with lastUpdatedTime normalised (the kubelet's manager reads the wall
// clock) and file modes checked.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, sub := range []string{"pulling", "pulled"} {
		d := filepath.Join(dir, "image_manager", sub)
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[sub+"/"+e.Name()] = fmt.Sprintf("%v %s", info.Mode().Perm(), lastUpdated.ReplaceAllString(string(b), `"lastUpdatedTime":"T"`))
		}
	}
	return out
}

// mappingKeys returns the credential mapping keys of every pulled record
// file in dir, sorted.
func mappingKeys(t *testing.T, dir string) []string {
	t.Helper()
	var keys []string
	d := filepath.Join(dir, "image_manager", "pulled")
	entries, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(d, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			CredentialMapping map[string]json.RawMessage `json:"credentialMapping"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for k := range rec.CredentialMapping {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
