package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
)

const (
	crdFile           = "../../deploy/crds/nodeimages.pullrecords.io.yaml"
	controllerManager = "pullrecords-controller"
	resync            = time.Minute
	// deadline bounds every wait for an eventual state; nothing is timed.
	deadline = 90 * time.Second
)

// start is the fake clock's start; the API server keeps seconds only.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	os.Exit(apiservertest.Main(m, apiservertest.Options{}))
}

var crdOnce sync.Once

// admin returns an admin dynamic client of the test API server, with the
// NodeImages CRD installed.
func admin(t *testing.T) dynamic.Interface {
	t.Helper()
	s := apiservertest.Need(t)
	var err error
	crdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		err = apiservertest.Apply(ctx, s.Admin, crdFile)
	})
	if err != nil {
		t.Fatalf("applying %s: %v", crdFile, err)
	}
	dyn, err := dynamic.NewForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// controllerApply applies obj (a NodeImages apply configuration) as the
// controller would, on the main resource or a subresource.
func controllerApply(t *testing.T, dyn dynamic.Interface, name string, obj map[string]any, subresources ...string) *api.NodeImages {
	t.Helper()
	obj["apiVersion"] = api.NodeImagesKind.GroupVersion().String()
	obj["kind"] = api.NodeImagesKind.Kind
	obj["metadata"] = map[string]any{"name": name}
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(api.NodeImagesResource).Patch(context.Background(), name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: controllerManager, Force: ptr.To(true)}, subresources...)
	if err != nil {
		t.Fatalf("controller apply to %s %v: %v", name, subresources, err)
	}
	var ni api.NodeImages
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ni); err != nil {
		t.Fatal(err)
	}
	return &ni
}

// spec is a controller apply configuration of a NodeImages spec. Each
// purge entry carries the pull record of cache default/cache, whose image
// reference is the entry's name itself (the agent resolves it to an ID).
func spec(images []string, purge []string) map[string]any {
	refs := map[string]string{}
	for _, n := range purge {
		refs[n] = n
	}
	return specRefs(images, purge, refs)
}

// specRefs is spec with the purge entries' recorded image references
// given (a name without one has no record).
func specRefs(images []string, purge []string, refs map[string]string) map[string]any {
	wanted := []any{}
	for _, n := range images {
		wanted = append(wanted, map[string]any{"image": n, "caches": []any{"default/cache"}})
	}
	purged := []any{}
	for _, n := range purge {
		e := map[string]any{"image": n}
		if ref := refs[n]; ref != "" {
			e["pulled"] = []any{map[string]any{"cache": "default/cache", "cacheUID": "uid-cache", "batch": "1-a", "imageRef": ref}}
		}
		purged = append(purged, e)
	}
	return map[string]any{"spec": map[string]any{"images": wanted, "purge": purged}}
}

func get(t *testing.T, dyn dynamic.Interface, name string) *api.NodeImages {
	t.Helper()
	u, err := dyn.Resource(api.NodeImagesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	var ni api.NodeImages
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ni); err != nil {
		t.Fatal(err)
	}
	return &ni
}

// waitFor polls name until cond holds, failing after deadline with the last
// object seen.
func waitFor(t *testing.T, dyn dynamic.Interface, name, what string, cond func(*api.NodeImages) bool) *api.NodeImages {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ni := get(t, dyn, name)
		if cond(ni) {
			return ni
		}
		if time.Now().After(end) {
			b, _ := json.MarshalIndent(ni.Status, "", "  ")
			t.Fatalf("%s: not reached within %v; status:\n%s", what, deadline, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type round struct {
	rv    string
	wrote bool
}

// harness is one agent under test with its fake runtime and clock.
type harness struct {
	dyn    dynamic.Interface
	fake   *critest.ImageService
	rt     *cri.ImageService
	clock  *clocktesting.FakeClock
	agent  *Agent
	rounds chan round
	fsPath string
	// pinned holds the image IDs the fake runtime reports pinned.
	pinned sync.Map
}

// fresh deletes the NodeImages objects names (left by an earlier run, as
// with -count) and again when the test ends.
func fresh(t *testing.T, dyn dynamic.Interface, names ...string) {
	t.Helper()
	del := func() error {
		ctx := context.Background()
		for _, n := range names {
			err := dyn.Resource(api.NodeImagesResource).Delete(ctx, n, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		for _, n := range names {
			end := time.Now().Add(deadline)
			for {
				_, err := dyn.Resource(api.NodeImagesResource).Get(ctx, n, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					break
				}
				if time.Now().After(end) {
					return errors.New(n + " not deleted")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		return nil
	}
	if err := del(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := del(); err != nil {
			t.Error(err)
		}
	})
}

func newHarness(t *testing.T, node string) *harness {
	t.Helper()
	h := &harness{
		dyn:    admin(t),
		fake:   critest.NewImageService(),
		clock:  clocktesting.NewFakeClock(start),
		rounds: make(chan round, 1000),
		fsPath: t.TempDir(),
	}
	h.fake.SetRuntimeVersion("containerd", "2.1.4")
	h.fake.SetImageFs(critest.FilesystemUsage{Mountpoint: "/var/lib/containerd", UsedBytes: 123456, InodesUsed: 77})
	endpoint := servePinning(t, h.fake, &h.pinned)
	rt, err := cri.Dial(context.Background(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	h.rt = rt
	guard, conn, err := DialCRIGuard(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h.agent, err = New(Config{
		NodeName:       node,
		Dynamic:        h.dyn,
		Runtime:        rt,
		Guard:          guard,
		ResyncInterval: resync,
		ImageFsPath:    h.fsPath,
		Clock:          h.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.agent.afterRound = func(rv string, wrote bool) {
		select {
		case h.rounds <- round{rv, wrote}:
		default:
		}
	}
	return h
}

// run runs the agent until the test ends.
func (h *harness) run(t *testing.T) {
	t.Helper()
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	done := make(chan error, 1)
	go func() { done <- h.agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
}

// waitRound waits for a round that worked on resourceVersion rv (any round
// when rv is "-") and returns whether it wrote.
func (h *harness) waitRound(t *testing.T, rv string) bool {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case r := <-h.rounds:
			if rv == "-" || r.rv == rv {
				return r.wrote
			}
		case <-timeout:
			t.Fatalf("no agent round on resourceVersion %q within %v", rv, deadline)
		}
	}
}

// tickUntil moves the fake clock on by the resync interval whenever the
// agent waits on it, until cond holds.
func (h *harness) tickUntil(t *testing.T, name, what string, cond func(*api.NodeImages) bool) *api.NodeImages {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ni := get(t, h.dyn, name)
		if cond(ni) {
			return ni
		}
		if time.Now().After(end) {
			b, _ := json.MarshalIndent(ni.Status, "", "  ")
			t.Fatalf("%s: not reached within %v; status:\n%s", what, deadline, b)
		}
		if h.clock.HasWaiters() {
			h.clock.Step(resync)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// step moves the fake clock on by the resync interval once the agent waits
// on it.
func (h *harness) step(t *testing.T) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !h.clock.HasWaiters() {
		if time.Now().After(end) {
			t.Fatalf("the agent set no timer within %v", deadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.clock.Step(resync)
}

func (h *harness) fsTotal(t *testing.T) int64 {
	t.Helper()
	n, err := filesystemSize(h.fsPath)
	if err != nil || n == 0 {
		t.Fatalf("statfs %s = %d, %v", h.fsPath, n, err)
	}
	return int64(n)
}

func mustAdd(t *testing.T, f *critest.ImageService, image string) string {
	t.Helper()
	id, err := f.AddImage(image)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func reported(ni *api.NodeImages) bool { return ni.Status.Agent != nil }

func callsOf(f *critest.ImageService, method string) []string {
	var out []string
	for _, c := range f.Calls() {
		if c.Method == method {
			out = append(out, c.Image)
		}
	}
	return out
}

func TestNewInvalidConfig(t *testing.T) {
	dyn := admin(t)
	rt := &cri.ImageService{}
	g := NewCRIGuard(nil)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no node", Config{Dynamic: dyn, Runtime: rt, Guard: g}, "NodeName"},
		{"bad node name", Config{NodeName: "Node_A", Dynamic: dyn, Runtime: rt, Guard: g}, "Node_A"},
		{"no client", Config{NodeName: "n", Runtime: rt, Guard: g}, "Dynamic"},
		{"no runtime", Config{NodeName: "n", Dynamic: dyn, Guard: g}, "Runtime"},
		{"no guard", Config{NodeName: "n", Dynamic: dyn, Runtime: rt}, "Guard"},
		{"negative resync", Config{NodeName: "n", Dynamic: dyn, Runtime: rt, Guard: g, ResyncInterval: -time.Second}, "-1s"},
	} {
		a, err := New(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || a != nil {
			t.Errorf("%s: New = %v, %v; want ErrInvalidConfig naming %q", tc.name, a, err, tc.want)
		}
	}
	a, err := New(Config{NodeName: "n", Dynamic: dyn, Runtime: rt, Guard: g})
	if err != nil || a.resync != DefaultResyncInterval || a.clock == nil {
		t.Errorf("New with defaults = %+v, %v; want resync %v and a real clock", a, err, DefaultResyncInterval)
	}
}

// (a) Presence is the runtime's exact answer: a reference that is a prefix
// or substring of a present one is absent.
func TestPresenceExact(t *testing.T) {
	const node = "presence-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	id := mustAdd(t, h.fake, "registry.example/team/app:1.2.3")
	obj := controllerApply(t, h.dyn, node, spec([]string{
		"registry.example/team/app:1.2.3", // present
		"registry.example/team/app:1.2",   // a prefix of the present tag
		"registry.example/team/ap:1.2.3",  // a substring of the present name
		"registry.example/team/app",       // :latest, absent
		"nginx:1.27",                      // absent
	}, nil))
	h.run(t)

	ni := waitFor(t, h.dyn, node, "agent report", reported)
	want := api.NodeImagesStatus{
		Agent: &api.AgentStatus{
			HeartbeatTime:      metav1.NewTime(start),
			ObservedGeneration: obj.Generation,
			RuntimeVersion:     "containerd://2.1.4",
			ImageFsUsedBytes:   123456,
			ImageFsTotalBytes:  h.fsTotal(t),
		},
		Images: []api.ImagePresence{
			{Image: "registry.example/team/app:1.2.3", Present: true, ImageRef: id, Size: critest.ImageSize},
			{Image: "registry.example/team/app:1.2"},
			{Image: "registry.example/team/ap:1.2.3"},
			{Image: "registry.example/team/app"},
			{Image: "nginx:1.27"},
		},
	}
	if diff := cmp.Diff(want, ni.Status, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// The agent asked the runtime, image by image, and removed nothing.
	asked := callsOf(h.fake, critest.ImageStatus)
	for _, img := range want.Images {
		if !slices.Contains(asked, img.Image) {
			t.Errorf("ImageStatus never asked about %q (asked %q)", img.Image, asked)
		}
	}
	if rm := callsOf(h.fake, critest.RemoveImage); len(rm) != 0 {
		t.Errorf("RemoveImage called for %q with nothing to purge", rm)
	}
	// The agent's fields are its own, on the status subresource.
	var owns bool
	for _, mf := range ni.ManagedFields {
		if mf.Manager == FieldManager {
			owns = true
			if mf.Subresource != "status" || mf.Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("agent's managed fields %+v, want an Apply on status", mf)
			}
			if f := string(mf.FieldsV1.Raw); strings.Contains(f, "f:spec") || strings.Contains(f, "f:results") {
				t.Errorf("agent owns %s, want status.agent and status.images only", f)
			}
		}
	}
	if !owns {
		t.Errorf("no managed fields of %s: %+v", FieldManager, ni.ManagedFields)
	}
}

// (b) Purge: a present purge image is removed by ID and reported absent;
// a RemoveImage error is reported until a later removal works; a purge
// entry the spec also wants is not touched (keeping wins).
func TestPurge(t *testing.T) {
	const node = "purge-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	oldID := mustAdd(t, h.fake, "example.com/old:1")
	busyID := mustAdd(t, h.fake, "example.com/busy:1")
	keepID := mustAdd(t, h.fake, "example.com/keep:1")
	var inUse atomic.Bool
	inUse.Store(true)
	h.fake.Intercept(critest.RemoveImage, func(_ context.Context, c critest.Call) error {
		if c.Image == busyID && inUse.Load() {
			return status.Error(codes.FailedPrecondition, "image is in use by container abc")
		}
		return nil
	})
	controllerApply(t, h.dyn, node, spec(
		[]string{"example.com/keep:1"},
		[]string{"example.com/old:1", "example.com/busy:1", "example.com/gone:1", "example.com/keep:1"}))
	h.run(t)

	ni := waitFor(t, h.dyn, node, "agent report", reported)
	want := []api.ImagePresence{
		{Image: "example.com/keep:1", Present: true, ImageRef: keepID, Size: critest.ImageSize},
		{Image: "example.com/old:1"},
		{Image: "example.com/busy:1", Present: true, ImageRef: busyID,
			RemoveError: `CRI RemoveImage "` + busyID + `": FailedPrecondition: image is in use by container abc`},
		{Image: "example.com/gone:1"},
	}
	if diff := cmp.Diff(want, ni.Status.Images); diff != "" {
		t.Errorf("status.images (-want +got):\n%s", diff)
	}
	if h.fake.Image("example.com/old:1") != nil {
		t.Error("old:1 still in the runtime")
	}
	if h.fake.Image("example.com/keep:1") == nil {
		t.Error("keep:1, wanted by the spec, was removed")
	}
	// Rounds may repeat (the agent's own write comes back): distinct calls.
	rm := slices.Compact(callsOf(h.fake, critest.RemoveImage))
	if diff := cmp.Diff([]string{oldID, busyID}, rm); diff != "" {
		t.Errorf("RemoveImage calls, by image ID (-want +got):\n%s", diff)
	}

	// The container is gone: the next resync removes the image and clears
	// the error.
	inUse.Store(false)
	ni = h.tickUntil(t, node, "busy:1 removed", func(ni *api.NodeImages) bool {
		for _, p := range ni.Status.Images {
			if p.Image == "example.com/busy:1" {
				return !p.Present
			}
		}
		return false
	})
	for _, p := range ni.Status.Images {
		if p.RemoveError != "" {
			t.Errorf("%s still reports removeError %q", p.Image, p.RemoveError)
		}
	}
	if h.fake.Image("example.com/busy:1") != nil {
		t.Error("busy:1 still in the runtime")
	}
}

// The checks the agent makes on the node right before RemoveImage: each
// purge entry below is recorded as pulled by a cache, and each would be
// removed (the old agent removed every one of them); only the last may go.
func TestPurgeKeepsWhatOthersNeed(t *testing.T) {
	const node = "purge-checks-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	// Another spelling of what the spec keeps: one image, two names.
	spellingID := mustAdd(t, h.fake, "docker.io/library/busybox:1.36")
	// A tag pair of one content: s:stable and s:v1 are one image (the fake
	// gives each tag its own ID, so s:stable's record names s:v1's image by
	// its repository digest, as a kubelet's imageID does).
	pairID := mustAdd(t, h.fake, "registry.example/s:v1")
	pairDigest, err := critest.Digest("registry.example/s:v1")
	if err != nil {
		t.Fatal(err)
	}
	pauseID := mustAdd(t, h.fake, "registry.k8s.io/pause:3.10")
	h.pinned.Store(pauseID, true)
	// A container of another tenant's pod, stopped, names its image by tag;
	// a running one names its image by ID.
	stoppedID := mustAdd(t, h.fake, "registry.example/tenant-a/app:1")
	runningID := mustAdd(t, h.fake, "registry.example/tenant-a/web:2")
	h.fake.SetContainers(
		&runtimeapi.Container{Id: "c1", Image: &runtimeapi.ImageSpec{Image: "registry.example/tenant-a/app:1"}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
		&runtimeapi.Container{Id: "c2", ImageRef: runningID, Image: &runtimeapi.ImageSpec{Image: runningID}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	)
	// The record of shared:latest names an image tagged shared:1 only, a
	// name this purge does not cover: someone else pulled it by that name.
	otherTagID := mustAdd(t, h.fake, "registry.example/shared:1")
	freeID := mustAdd(t, h.fake, "registry.example/mine:1")

	refs := map[string]string{
		"busybox:1.36":                    "busybox:1.36",
		"registry.example/s:stable":       "registry.example/s@" + pairDigest,
		"registry.k8s.io/pause:3.10":      pauseID,
		"registry.example/tenant-a/app:1": "registry.example/tenant-a/app:1",
		"registry.example/tenant-a/web:2": runningID,
		"registry.example/shared:latest":  otherTagID,
		"registry.example/mine:1":         freeID,
		"registry.example/never-pulled:1": "",
	}
	mustAdd(t, h.fake, "registry.example/never-pulled:1")
	purge := []string{"busybox:1.36", "registry.example/s:stable", "registry.k8s.io/pause:3.10", "registry.example/tenant-a/app:1",
		"registry.example/tenant-a/web:2", "registry.example/shared:latest", "registry.example/never-pulled:1", "registry.example/mine:1"}
	controllerApply(t, h.dyn, node, specRefs([]string{"docker.io/library/busybox:1.36", "registry.example/s:v1"}, purge, refs))
	h.run(t)

	ni := waitFor(t, h.dyn, node, "agent report", reported)
	got := map[string]api.ImagePresence{}
	for _, p := range ni.Status.Images {
		got[p.Image] = p
	}
	for image, kept := range map[string]string{
		"busybox:1.36":                    keptByCache,
		"registry.example/s:stable":       keptByCache,
		"registry.k8s.io/pause:3.10":      keptPinned,
		"registry.example/tenant-a/app:1": keptInUse,
		"registry.example/tenant-a/web:2": keptInUse,
		"registry.example/shared:latest":  "it has other tags on the node (registry.example/shared:1)",
		"registry.example/never-pulled:1": keptNoRecord,
	} {
		if p := got[image]; !p.Present || p.Kept != kept || p.RemoveError != "" {
			t.Errorf("%s: %+v, want present and kept %q", image, p, kept)
		}
	}
	if p := got["registry.example/mine:1"]; p.Present || p.Kept != "" {
		t.Errorf("mine:1 %+v, want removed", p)
	}
	rm := callsOf(h.fake, critest.RemoveImage)
	if diff := cmp.Diff([]string{freeID}, rm); diff != "" {
		t.Errorf("RemoveImage calls (-want +got):\n%s", diff)
	}
	for _, id := range []string{spellingID, pairID, pauseID, stoppedID, runningID, otherTagID} {
		if h.fake.Image(id) == nil {
			t.Errorf("image %s was removed", id)
		}
	}
	if calls := callsOf(h.fake, critest.ListContainers); len(calls) == 0 {
		t.Error("the agent never listed the node's containers before removing")
	}
}

// A wanted image whose status is unknown this round stops every removal:
// the purge entry might be that image under another name.
func TestPurgeWaitsWhileAWantedImageIsUnknown(t *testing.T) {
	const node = "purge-unknown-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	mustAdd(t, h.fake, "example.com/a:1")
	mustAdd(t, h.fake, "example.com/old:1")
	var failing atomic.Bool
	failing.Store(true)
	h.fake.Intercept(critest.ImageStatus, func(_ context.Context, c critest.Call) error {
		if c.Image == "example.com/a:1" && failing.Load() {
			return status.Error(codes.Internal, "metadata store busy")
		}
		return nil
	})
	controllerApply(t, h.dyn, node, spec([]string{"example.com/a:1"}, []string{"example.com/old:1"}))
	h.run(t)
	ni := waitFor(t, h.dyn, node, "agent report", reported)
	if len(ni.Status.Images) != 0 {
		t.Errorf("status.images %+v, want none reported (a:1 unknown, old:1 not purged)", ni.Status.Images)
	}
	if rm := callsOf(h.fake, critest.RemoveImage); len(rm) != 0 || h.fake.Image("example.com/old:1") == nil {
		t.Errorf("removed %q while a wanted image was unknown", rm)
	}
	failing.Store(false)
	h.tickUntil(t, node, "old:1 removed", func(ni *api.NodeImages) bool {
		for _, p := range ni.Status.Images {
			if p.Image == "example.com/old:1" {
				return !p.Present
			}
		}
		return false
	})
}

// (c) The controller's status.results survive the agent's writes, and the
// agent's fields survive the controller's.
func TestResultsSurvive(t *testing.T) {
	const node = "results-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	mustAdd(t, h.fake, "example.com/a:1")
	controllerApply(t, h.dyn, node, spec([]string{"example.com/a:1"}, nil))
	results := func(batch string) map[string]any {
		return map[string]any{"status": map[string]any{"results": []any{map[string]any{
			"cache": "default/cache", "cacheUID": "uid-1", "image": "example.com/a:1", "batch": batch,
			"work": "create", "status": "succeeded", "time": "2026-03-01T11:00:00Z",
		}}}}
	}
	controllerApply(t, h.dyn, node, results("b1"), "status")
	h.run(t)

	ni := waitFor(t, h.dyn, node, "agent report", reported)
	if len(ni.Status.Results) != 1 || ni.Status.Results[0].Batch != "b1" {
		t.Fatalf("results after the agent's write = %+v, want the controller's b1", ni.Status.Results)
	}
	// A spec change makes the agent write again; the results stay.
	obj := controllerApply(t, h.dyn, node, spec([]string{"example.com/a:1", "example.com/b:1"}, nil))
	ni = waitFor(t, h.dyn, node, "report of generation 2", func(ni *api.NodeImages) bool {
		return ni.Status.Agent.ObservedGeneration == obj.Generation
	})
	if len(ni.Status.Results) != 1 || ni.Status.Results[0].Batch != "b1" {
		t.Errorf("results after the agent's second write = %+v, want the controller's b1", ni.Status.Results)
	}
	if len(ni.Status.Images) != 2 {
		t.Errorf("images = %+v, want a:1 and b:1", ni.Status.Images)
	}

	// The controller writes its results again; the agent's report stays, and
	// the agent, with nothing new to say and its heartbeat not due, does not
	// write.
	after := controllerApply(t, h.dyn, node, results("b2"), "status")
	if wrote := h.waitRound(t, after.ResourceVersion); wrote {
		t.Error("the agent wrote after a change of the controller's fields only")
	}
	ni = get(t, h.dyn, node)
	if ni.ResourceVersion != after.ResourceVersion {
		t.Errorf("resourceVersion %s after the agent's round, want the controller's %s", ni.ResourceVersion, after.ResourceVersion)
	}
	if ni.Status.Agent == nil || len(ni.Status.Images) != 2 || ni.Status.Results[0].Batch != "b2" {
		t.Errorf("status after the controller's write = %+v", ni.Status)
	}
}

// (d) observedGeneration follows the spec, and the heartbeat follows the
// clock.
func TestObservedGenerationAndHeartbeat(t *testing.T) {
	const node = "generation-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	obj := controllerApply(t, h.dyn, node, spec([]string{"example.com/a:1"}, nil))
	h.run(t)
	ni := waitFor(t, h.dyn, node, "agent report", reported)
	if ni.Status.Agent.ObservedGeneration != obj.Generation {
		t.Errorf("observedGeneration = %d, want %d", ni.Status.Agent.ObservedGeneration, obj.Generation)
	}
	for gen, images := range [][]string{{"example.com/a:1", "example.com/b:1"}, {"example.com/c:1"}} {
		obj = controllerApply(t, h.dyn, node, spec(images, nil))
		if obj.Generation != int64(gen+2) {
			t.Fatalf("generation %d after spec change %d", obj.Generation, gen+1)
		}
		ni = waitFor(t, h.dyn, node, "report of the new generation", func(ni *api.NodeImages) bool {
			return ni.Status.Agent.ObservedGeneration == obj.Generation
		})
		var got []string
		for _, p := range ni.Status.Images {
			got = append(got, p.Image)
		}
		if !slices.Equal(got, images) {
			t.Errorf("generation %d: images %q, want %q", obj.Generation, got, images)
		}
	}
	if !ni.Status.Agent.HeartbeatTime.Time.Equal(start) {
		t.Errorf("heartbeat %v with the clock unmoved, want %v", ni.Status.Agent.HeartbeatTime, start)
	}
	ni = h.tickUntil(t, node, "heartbeat", func(ni *api.NodeImages) bool {
		return ni.Status.Agent.HeartbeatTime.Time.After(start)
	})
	if hb := ni.Status.Agent.HeartbeatTime.Time; hb.Before(start.Add(resync)) || !hb.Equal(hb.Truncate(time.Second)) {
		t.Errorf("heartbeat %v, want at least %v", hb, start.Add(resync))
	}
	if ni.Status.Agent.ObservedGeneration != obj.Generation {
		t.Errorf("heartbeat changed observedGeneration to %d", ni.Status.Agent.ObservedGeneration)
	}
}

// (e) An agent given an admin client writes its own node's object only,
// and never creates one.
func TestOwnObjectOnly(t *testing.T) {
	const node, other, missing = "own-a", "own-b", "own-missing"
	h := newHarness(t, node)
	fresh(t, h.dyn, node, other, missing)
	mustAdd(t, h.fake, "example.com/a:1")
	controllerApply(t, h.dyn, node, spec([]string{"example.com/a:1"}, nil))
	controllerApply(t, h.dyn, other, spec([]string{"example.com/a:1"}, []string{"example.com/a:1"}))
	h.run(t)
	waitFor(t, h.dyn, node, "agent report", reported)
	// Changes to the other object and resyncs: the agent still leaves it
	// alone (its watch does not even see it).
	o := controllerApply(t, h.dyn, other, spec([]string{"example.com/a:1", "example.com/b:1"}, nil))
	h.tickUntil(t, node, "a resync", func(ni *api.NodeImages) bool {
		return ni.Status.Agent.HeartbeatTime.Time.After(start)
	})
	ob := get(t, h.dyn, other)
	if ob.Status.Agent != nil || len(ob.Status.Images) != 0 || ob.ResourceVersion != o.ResourceVersion {
		t.Errorf("other node's object written: %+v (resourceVersion %s, was %s)", ob.Status, ob.ResourceVersion, o.ResourceVersion)
	}
	for _, mf := range ob.ManagedFields {
		if mf.Manager == FieldManager {
			t.Errorf("agent of %s manages fields of %s: %+v", node, other, mf)
		}
	}
	if h.fake.Image("example.com/a:1") == nil {
		t.Error("the other node's purge list removed an image here")
	}

	// An agent whose node has no object waits; it creates nothing.
	m := newHarness(t, missing)
	m.run(t)
	if rv := m.waitRound(t, "-"); rv {
		t.Error("agent without an object wrote")
	}
	for range 3 {
		m.step(t)
		if m.waitRound(t, "-") {
			t.Error("agent without an object wrote")
		}
	}
	if _, err := h.dyn.Resource(api.NodeImagesResource).Get(context.Background(), missing, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get %s = %v, want NotFound: the agent must not create its object", missing, err)
	}
	// Once the controller creates it, the agent reports.
	controllerApply(t, h.dyn, missing, spec([]string{"example.com/x:1"}, nil))
	waitFor(t, h.dyn, missing, "report after creation", reported)
}

// Runtime failures: an image whose status fails is left out for the round;
// an unreachable runtime makes the agent write nothing and retry.
func TestRuntimeFailures(t *testing.T) {
	const node = "failing-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	mustAdd(t, h.fake, "example.com/a:1")
	var broken, down atomic.Bool
	broken.Store(true)
	down.Store(true)
	h.fake.Intercept(critest.ImageStatus, func(_ context.Context, c critest.Call) error {
		if c.Image == "example.com/bad:1" && broken.Load() {
			return status.Error(codes.Internal, "corrupt metadata")
		}
		return nil
	})
	h.fake.Intercept(critest.ImageFsInfo, func(context.Context, critest.Call) error {
		if down.Load() {
			return status.Error(codes.Unavailable, "connection refused")
		}
		return nil
	})
	controllerApply(t, h.dyn, node, spec([]string{"example.com/a:1", "example.com/bad:1"}, nil))
	h.run(t)
	// Unreachable: rounds run and write nothing.
	for range 3 {
		if wrote := h.waitRound(t, "-"); wrote {
			t.Fatal("the agent wrote while the runtime was unreachable")
		}
		h.step(t)
	}
	if ni := get(t, h.dyn, node); ni.Status.Agent != nil {
		t.Fatalf("status written while the runtime was unreachable: %+v", ni.Status)
	}
	down.Store(false)
	ni := h.tickUntil(t, node, "report once reachable", reported)
	if len(ni.Status.Images) != 1 || ni.Status.Images[0].Image != "example.com/a:1" || !ni.Status.Images[0].Present {
		t.Errorf("images = %+v, want a:1 present and bad:1 left out", ni.Status.Images)
	}
	broken.Store(false)
	h.tickUntil(t, node, "bad:1 reported", func(ni *api.NodeImages) bool { return len(ni.Status.Images) == 2 })
}

// A purge entry whose recorded image cannot be resolved this round is left
// out of the report and nothing of it is removed: an unknown is never
// reported as gone.
func TestPurgeEntryUnknownIsNotGone(t *testing.T) {
	const node = "purge-entry-unknown-node"
	h := newHarness(t, node)
	fresh(t, h.dyn, node)
	id := mustAdd(t, h.fake, "example.com/old:1")
	var failing atomic.Bool
	failing.Store(true)
	h.fake.Intercept(critest.ImageStatus, func(_ context.Context, c critest.Call) error {
		if c.Image == id && failing.Load() {
			return status.Error(codes.Internal, "metadata store busy")
		}
		return nil
	})
	controllerApply(t, h.dyn, node, specRefs(nil, []string{"example.com/old:1"}, map[string]string{"example.com/old:1": id}))
	h.run(t)
	ni := waitFor(t, h.dyn, node, "agent report", reported)
	if len(ni.Status.Images) != 0 {
		t.Errorf("status.images %+v, want the unknown purge entry left out", ni.Status.Images)
	}
	if rm := callsOf(h.fake, critest.RemoveImage); len(rm) != 0 || h.fake.Image(id) == nil {
		t.Errorf("removed %q while the purge entry was unknown", rm)
	}
	failing.Store(false)
	h.tickUntil(t, node, "old:1 removed", func(ni *api.NodeImages) bool {
		return len(ni.Status.Images) == 1 && !ni.Status.Images[0].Present && h.fake.Image(id) == nil
	})
}
