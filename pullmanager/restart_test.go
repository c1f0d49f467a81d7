package pullmanager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
)

// copyDir copies the regular files under src to dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openDiskStore opens the kubelet directory dir the way an embedding program
// does: fsstore with the memstore cache in front.
//
// A writable store holds the directory's writer lock until it is closed, so
// a "restart" closes the store the previous manager used first, as the
// death of the previous process would release its lock.
func openDiskStore(t testing.TB, dir string, opts ...fsstore.Option) *memstore.Cache {
	t.Helper()
	openStores.Lock()
	defer openStores.Unlock()
	if prev := openStores.byDir[dir]; prev != nil {
		if err := prev.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := fsstore.New(logr.Discard(), dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := memstore.NewCache(logr.Discard(), fs)
	if err != nil {
		t.Fatal(err)
	}
	openStores.byDir[dir] = fs
	t.Cleanup(func() {
		openStores.Lock()
		defer openStores.Unlock()
		if openStores.byDir[dir] == fs {
			delete(openStores.byDir, dir)
		}
		fs.Close()
	})
	return c
}

// openStores remembers the store openDiskStore last opened per directory.
var openStores = struct {
	sync.Mutex
	byDir map[string]*fsstore.Store
}{byDir: map[string]*fsstore.Store{}}

type checkCase struct {
	name, image, ref string
	secrets          []accessor.ImagePullSecret
	sa               *accessor.ImagePullServiceAccount
	want             bool
	wantAsked        bool
}

func runChecks(t *testing.T, m *PullManager, cases []checkCase) {
	t.Helper()
	ctx, _ := testCtx(t)
	for _, c := range cases {
		calls := 0
		got, err := m.MustAttemptImagePull(ctx, c.image, c.ref, podCreds(&calls, c.secrets, c.sa, nil))
		if err != nil || got != c.want || (calls > 0) != c.wantAsked {
			t.Errorf("%s: got (%v, %v, asked %d), want (%v, nil, asked %v)", c.name, got, err, calls, c.want, c.wantAsked)
		}
	}
}

// TestKubeletFiles runs the manager over record files in the kubelet's own
// format (v1alpha1 and v1beta1, names as the kubelet computes them), from
// testdata/kubelet (this package's fixture, laid out as a kubelet
// directory), then restarts over the same directory.
func TestKubeletFiles(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", "kubelet"), dir)
	ctx, _ := testCtx(t)
	runtime := &fakeImages{images: []imageruntime.Image{
		{ID: "testimageref", RepoTags: []string{"docker.io/testing/test:latest"}},
		{ID: "sha256:busybox", RepoTags: []string{"docker.io/library/busybox:latest"}},
	}}
	store := openDiskStore(t, dir, fsstore.WithoutSync())
	m, err := NewImagePullManager(ctx, store, mustPolicy(t, NeverVerifyPreloadedImages), runtime)
	if err != nil {
		t.Fatal(err)
	}
	goodHash := []accessor.ImagePullSecret{secret("other-uid", "other", "copy", "testsecrethash")}
	runChecks(t, m, []checkCase{
		{name: "v1alpha1 record, same hash under other coordinates", image: "docker.io/testing/test:latest", ref: "testimageref",
			secrets: goodHash, want: false, wantAsked: true},
		{name: "v1alpha1 record, no secret", image: "docker.io/testing/test:latest", ref: "testimageref", want: true, wantAsked: true},
		{name: "node-wide record, its own spelling", image: "docker.io/library/nginx:1.27", ref: "sha256:nodewide", want: false},
		// The mapping key is the raw name (kubelet v1.37): "nginx" is not
		// "docker.io/library/nginx".
		{name: "node-wide record, short name", image: "nginx:1.27", ref: "sha256:nodewide", want: true},
		{name: "service account record", image: "registry.example/team/app:v1", ref: "sha256:withsa",
			sa: &accessor.ImagePullServiceAccount{UID: "sauid", Namespace: "team", Name: "builder"}, want: false, wantAsked: true},
		{name: "service account record, other SA", image: "registry.example/team/app:v1", ref: "sha256:withsa",
			sa: &accessor.ImagePullServiceAccount{UID: "x", Namespace: "team", Name: "builder"}, want: true, wantAsked: true},
		{name: "empty record", image: "anything:1", ref: "sha256:empty", want: true},
		{name: "recovered busybox intent", image: "busybox", ref: "sha256:busybox", want: true},
		{name: "preloaded image", image: "registry.example/preloaded:1", ref: "sha256:preloaded", want: false},
	})
	// As the kubelet: "docker.io/testing/test:latest" equals a runtime tag
	// and is recovered; "busybox" equals none ("docker.io/library/busybox:latest"
	// is another string) and stays.
	intents, err := store.ListImagePullIntents()
	if err != nil || len(intents) != 1 || intents[0].Image != "busybox" {
		t.Errorf("intents after recovery: %v, %v; want only busybox", intents, err)
	}

	// Restart over the same directory: the check-time write and the
	// recovered record are on disk.
	store2 := openDiskStore(t, dir, fsstore.WithoutSync())
	m2, err := NewImagePullManager(ctx, store2, mustPolicy(t, NeverVerifyPreloadedImages), runtime)
	if err != nil {
		t.Fatal(err)
	}
	r, ok, err := store2.GetImagePulledRecord("testimageref")
	if err != nil || !ok {
		t.Fatalf("testimageref: %v %v", ok, err)
	}
	want := []accessor.ImagePullSecret{secret("testsecretuid", "default", "pull-secret", "testsecrethash"), secret("other-uid", "other", "copy", "testsecrethash")}
	if diff := cmp.Diff(want, r.CredentialMapping["docker.io/testing/test"].KubernetesSecrets); diff != "" {
		t.Errorf("secrets after restart (-want +got):\n%s", diff)
	}
	runChecks(t, m2, []checkCase{
		{name: "after restart: recorded coordinates", image: "docker.io/testing/test:v2", ref: "testimageref",
			secrets: []accessor.ImagePullSecret{secret("other-uid", "other", "copy", "rotated")}, want: false, wantAsked: true},
		// The intent for "busybox" makes only that spelling kubelet-pulled;
		// as upstream, another spelling of the same content counts as
		// preloaded.
		{name: "after restart: leftover intent", image: "busybox", ref: "sha256:busybox", want: true},
		{name: "after restart: other spelling of a leftover intent", image: "docker.io/library/busybox:latest", ref: "sha256:busybox", want: false},
	})
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// TestRestartSeesIntentsAndRecords: a new manager over the same fsstore
// directory sees the old process's records and its leftover intents (which
// mark the image as pulled by the kubelet until recovered).
func TestRestartSeesIntentsAndRecords(t *testing.T) {
	dir := t.TempDir()
	ctx, logger := testCtx(t)
	policy := mustPolicy(t, NeverVerifyPreloadedImages)
	m1, err := NewImagePullManager(ctx, openDiskStore(t, dir), policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	s1 := secret("u1", "team", "pull", "h1")
	if err := m1.RecordPullIntent(logger, imgX); err != nil {
		t.Fatal(err)
	}
	m1.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s1}})
	// A pull in flight when the process dies.
	if err := m1.RecordPullIntent(logger, "private.example/db:1"); err != nil {
		t.Fatal(err)
	}

	// Restart; the runtime does not (yet) have the in-flight image.
	m2, err := NewImagePullManager(ctx, openDiskStore(t, dir), policy, &fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	runChecks(t, m2, []checkCase{
		{name: "record survives", image: imgX, ref: refA, secrets: []accessor.ImagePullSecret{s1}, want: false, wantAsked: true},
		{name: "record survives, other pod", image: imgX, ref: refA, want: true, wantAsked: true},
		// The image appeared (preloaded by someone) while the intent is left:
		// the intent says the kubelet was pulling it, so it is verified.
		{name: "leftover intent counts as pulled", image: "private.example/db:1", ref: "sha256:db", want: true},
	})
	// Restart again; now the runtime has the image: the intent is recovered.
	m3, err := NewImagePullManager(ctx, openDiskStore(t, dir), policy,
		&fakeImages{images: []imageruntime.Image{{ID: "sha256:db", RepoTags: []string{"private.example/db:1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	runChecks(t, m3, []checkCase{{name: "recovered intent", image: "private.example/db:1", ref: "sha256:db", want: true}})
	store := openDiskStore(t, dir)
	if n := store.CountImagePullIntents(); n != 0 {
		t.Errorf("%d intents left after recovery", n)
	}
	if r, ok, _ := store.GetImagePulledRecord("sha256:db"); !ok || len(r.CredentialMapping) != 0 {
		t.Errorf("recovered record = %+v, %v; want an empty mapping", r, ok)
	}
}

// racingStore simulates a pull of the same imageRef that completes right
// after a check read the record for its decision.
type racingStore struct {
	*memstore.Store
	afterFirstPeek func()
	peeks          int
}

func (s *racingStore) PeekImagePulledRecord(ref string) (*accessor.ImagePulledRecord, bool, error) {
	r, ok, err := s.Store.PeekImagePulledRecord(ref)
	s.peeks++
	if s.peeks == 1 && s.afterFirstPeek != nil {
		s.afterFirstPeek()
	}
	return r, ok, err
}

// TestCheckTimeWriteUnderLock: the write a check makes (adding an accepted
// pod secret) re-reads the record under its lock. Upstream writes after
// releasing its locks, deciding the 100-secret limit on the stale copy
// (MustAttemptImagePull in pkg/kubelet/images/pullmanager/
// image_pull_manager.go checks the limit on the record it read, then calls
// writePulledRecordIfChanged, which does not check it). Here a pull that filled the
// entry to 100 secrets between the decision and the write is respected.
func TestCheckTimeWriteUnderLock(t *testing.T) {
	ctx, _ := testCtx(t)
	store := &racingStore{Store: memstore.New()}
	logger := logr.Discard()
	var secrets99 []accessor.ImagePullSecret
	for i := range 99 {
		secrets99 = append(secrets99, secret("u"+string(rune('A'+i%26))+string(rune('a'+i/26)), "ns", "s", "h"))
	}
	if err := store.WriteImagePulledRecord(logger, rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: secrets99}})); err != nil {
		t.Fatal(err)
	}
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify))
	store.afterFirstPeek = func() {
		r, _, _ := store.GetImagePulledRecord(refA)
		e := r.CredentialMapping[keyX]
		e.KubernetesSecrets = append(e.KubernetesSecrets, secret("late", "ns", "late", "late-hash"))
		r.CredentialMapping[keyX] = e
		if err := store.WriteImagePulledRecord(logger, r); err != nil {
			t.Error(err)
		}
	}
	calls := 0
	got, err := m.MustAttemptImagePull(ctx, imgX, refA, podCreds(&calls, []accessor.ImagePullSecret{secret("new", "new", "new", "h")}, nil, nil))
	if got || err != nil {
		t.Fatalf("check = %v, %v; want accepted (hash match)", got, err)
	}
	r, _, _ := store.GetImagePulledRecord(refA)
	if n := len(r.CredentialMapping[keyX].KubernetesSecrets); n != 100 {
		t.Errorf("entry has %d secrets, want 100 (the check must not write past the limit)", n)
	}
}

// TestHammer runs concurrent pulls and checks of the same images (run with
// -race). Every pull records a distinct secret; a check by a pod holding a
// secret whose pull has completed must be accepted, and a pod with an
// unknown secret never is.
func TestHammer(t *testing.T) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	store, err := memstore.NewCache(logr.Discard(), memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewImagePullManager(ctx, store, mustPolicy(t, AlwaysVerify), nil, WithMetrics(NewMetrics()), WithLockStripes(3))
	if err != nil {
		t.Fatal(err)
	}
	images := []struct{ image, ref string }{
		{"registry.example/a:1", "sha256:a"}, {"registry.example/a:2", "sha256:a"}, {"registry.example/b:1", "sha256:b"},
	}
	const workers, rounds = 8, 60
	errs := make(chan string, workers*rounds)
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			logger := logr.Discard()
			for i := range rounds {
				im := images[(w+i)%len(images)]
				mine := secret("uid-"+string(rune('a'+w)), "ns", "s", "hash-"+string(rune('a'+w)))
				if err := m.RecordPullIntent(logger, im.image); err != nil {
					errs <- err.Error()
					return
				}
				if i%5 == 4 {
					m.RecordImagePullFailed(ctx, im.image)
					continue
				}
				m.RecordImagePulled(ctx, im.image, im.ref, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{mine}})
				if got, err := m.MustAttemptImagePull(ctx, im.image, im.ref, func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
					return []accessor.ImagePullSecret{mine}, nil, nil
				}); got || err != nil {
					errs <- "a recorded secret was refused: " + im.image
				}
				// Same hash, new coordinates: a check-time write.
				copyOf := secret("copy-"+string(rune('a'+w)), "other", "s", mine.CredentialHash)
				if got, _ := m.MustAttemptImagePull(ctx, im.image, im.ref, func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
					return []accessor.ImagePullSecret{copyOf}, nil, nil
				}); got {
					errs <- "a known hash was refused: " + im.image
				}
				if got, _ := m.MustAttemptImagePull(ctx, im.image, im.ref, func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
					return []accessor.ImagePullSecret{secret("intruder", "evil", "s", "unknown")}, nil, nil
				}); !got {
					errs <- "SECURITY: an unknown secret was accepted: " + im.image
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := store.CountImagePullIntents(); n != 0 {
		t.Errorf("%d intents left after every pull ended", n)
	}
	for _, im := range images {
		if c := m.intents.get(im.image); c != 0 {
			t.Errorf("%s: count %d", im.image, c)
		}
		r, ok, err := store.GetImagePulledRecord(im.ref)
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", im.ref, ok, err)
		}
		key, _ := NormalizeImageName(im.image)
		seen := map[string]bool{}
		for _, s := range r.CredentialMapping[key].KubernetesSecrets {
			seen[s.UID] = true
		}
		for w := range workers {
			for _, uid := range []string{"uid-" + string(rune('a'+w)), "copy-" + string(rune('a'+w))} {
				// Worker w pulls image index (w+i)%3 for i in rounds; every
				// worker touches every image.
				if !seen[uid] {
					t.Errorf("%s: secret %s lost", key, uid)
				}
			}
		}
	}
}

// TestSharedKubeletFixtures runs checks over the repository's kubelet-format
// fixtures (../testdata/kubelet/{pulling,pulled}), laid out as a kubelet
// directory.
func TestSharedKubeletFixtures(t *testing.T) {
	src := filepath.Join("..", "testdata", "kubelet")
	if !dirExists(filepath.Join(src, "pulled")) {
		t.Fatalf("fixture directory %s is missing", src)
	}
	dir := t.TempDir()
	copyDir(t, src, filepath.Join(dir, "image_manager"))
	ctx, _ := testCtx(t)
	const (
		pause = "registry.k8s.io/pause@sha256:7777777777777777777777777777777777777777777777777777777777777777"
		hashA = "aaaaaaaa0123456789abcdef0123456789abcdef0123456789abcdefbbbbbbbb"
	)
	runtime := &fakeImages{images: []imageruntime.Image{
		{ID: "testimageref", RepoTags: []string{"docker.io/testing/test:latest"}},
		{ID: "sha256:pause", RepoDigests: []string{pause}},
	}}
	store := openDiskStore(t, dir, fsstore.WithoutSync())
	m, err := NewImagePullManager(ctx, store, mustPolicy(t, NeverVerifyPreloadedImages), runtime)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(pair string) string { return "sha256:" + strings.Repeat(pair, 32) }
	api := "sha256:3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c"
	runChecks(t, m, []checkCase{
		{name: "secret hash", image: "ghcr.io/acme/api:v1", ref: api,
			secrets: []accessor.ImagePullSecret{secret("x", "y", "z", hashA)}, want: false, wantAsked: true},
		{name: "empty cached hash, same coordinates", image: "ghcr.io/acme/api:v1", ref: api,
			secrets: []accessor.ImagePullSecret{secret("9b7d5e3a-1c2f-4e6a-8b9c-0d1e2f3a4b5c", "payments", "ghcr-pull-old", "")}, want: false, wantAsked: true},
		{name: "service account", image: "ghcr.io/acme/api:v1", ref: api,
			sa: &accessor.ImagePullServiceAccount{UID: "c0ffee00-1111-2222-3333-444455556666", Namespace: "payments", Name: "api"}, want: false, wantAsked: true},
		{name: "no credentials", image: "ghcr.io/acme/api:v1", ref: api, want: true, wantAsked: true},
		{name: "canary service account", image: "ghcr.io/acme/api-canary:v2", ref: api,
			sa: &accessor.ImagePullServiceAccount{UID: "c0ffee00-aaaa-bbbb-cccc-ddddeeeeffff", Namespace: "canary", Name: "deployer"}, want: false, wantAsked: true},
		{name: "node-wide nginx", image: "docker.io/library/nginx", ref: ref("5e"), want: false},
		{name: "node-wide nginx, short name (another key)", image: "nginx", ref: ref("5e"), want: true},
		{name: "entry without credentials", image: "busybox:1.36", ref: ref("e7"), want: true},
		{name: "v1alpha1 record, secret", image: "quay.io/team/tool:1", ref: ref("d4"),
			secrets: []accessor.ImagePullSecret{secret("uid-2", "dev", "quay", hashA)}, want: false, wantAsked: true},
		{name: "v1alpha1 record, node-wide name", image: "registry.example.com/public/tool:1", ref: ref("d4"), want: false},
		{name: "record without mapping", image: "anything:1", ref: ref("9a"), want: true},
		{name: "preloaded", image: "registry.example/preloaded:1", ref: "sha256:preloaded", want: false},
		{name: "leftover intent not in the runtime counts as pulled", image: "repo.repo/test/test:v1", ref: "sha256:repo", want: true},
	})
	var left []string
	intents, _ := store.ListImagePullIntents()
	for _, i := range intents {
		left = append(left, i.Image)
	}
	if diff := cmp.Diff([]string{"docker.io/testing/test-alpha:latest", "repo.repo/test/test:v1"}, left, cmpSorted); diff != "" {
		t.Errorf("intents left (-want +got):\n%s", diff)
	}
	if r, ok, _ := store.GetImagePulledRecord("sha256:pause"); !ok || len(r.CredentialMapping) != 0 {
		t.Errorf("digest intent not recovered: %+v %v", r, ok)
	}
}
