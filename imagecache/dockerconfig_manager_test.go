package imagecache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// secretMaterial is every password, "auth" value and credential hash of
// mainConfig: none may reach a state file, a result or a log.
var secretMaterial = []string{
	"p-host", "p:with:colons", "p-app", "p-glob", "p-port", "hubpass1", "p-quay", "p-insecure",
	"dS10ZWFtOnA6d2l0aDpjb2xvbnM", "aHVidXNlcjpodWJwYXNzMQ",
	"c291fe27dfd3cc624e52ad2d403ad73905146e5994ba0efb36eaacfda8e1f3a2", // u-app
	"e0199edf5ae22a704efdb3ad3b0eb82fac5cfd99f5a788514b48a362ac345781", // u-quay
	"656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889", // u-host
}

// loggedManager is fixture.manager with a logger that keeps everything it
// is given (verbosity 10) for inspection.
func (f *fixture) loggedManager(t *testing.T, opts ...Option) (*Manager, func() string) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	all := append([]Option{withClock(f.clock), WithRetries(3, time.Millisecond, 5*time.Millisecond),
		WithNode("node-1", "containerd://1.6.20")}, f.sink.options()...)
	m, err := New(logger, f.svc, f.pulls, append(all, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, func() string { return logger.GetSink().(ktesting.Underlier).GetBuffer().String() }
}

func assertNoSecretMaterial(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range secretMaterial {
		if strings.Contains(text, s) {
			t.Errorf("%s holds secret material %q:\n%s", what, s, text)
		}
	}
}

func resultsByImage(st CacheStatus) map[string]ImageWorkResult {
	out := map[string]ImageWorkResult{}
	for _, r := range st.Results {
		out[r.Request.Image] = r
	}
	return out
}

// mappingKey is the key the pull manager maps image's credentials under.
func mappingKey(t *testing.T, image string) string {
	t.Helper()
	key, err := pullmanager.MappingKey(image)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func secretRecord(hash string) accessor.ImagePullCredentials {
	return accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{
		{UID: "uid-1", Namespace: "ns", Name: "regcred", CredentialHash: hash}}}
}

// A cache whose pull secret is a mounted dockerconfigjson secret pulls each
// image with the entry the kubelet would pick first, records the hash the
// kubelet records for a pod with that secret (the upstream vectors of
// dockerconfig_test.go), and keeps only the path in the state file.
func TestDockerConfigPullsAndRecordsAsTheKubelet(t *testing.T) {
	f := newFixture(t)
	f.images.requireAuth("registry.example.com/team-a/app:1", "u-app:p-app")
	f.images.requireAuth("quay.io/coreos/etcd:v3", "u-quay:p-quay")
	f.images.requireAuth("ubuntu", "hubuser:hubpass1")
	secretDir := filepath.Join(t.TempDir(), "volumes", "regcred")
	mountSecret(t, secretDir, map[string]string{".dockerconfigjson": mainConfig})
	stateDir := filepath.Join(t.TempDir(), "state")
	m, logs := f.loggedManager(t, WithStateDir(stateDir), WithWorkers(1)) // pulls in request order
	run(t, m)

	secret := &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: secretDir}
	images := []string{"registry.example.com/team-a/app:1", "quay.io/coreos/etcd:v3", "ubuntu"}
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "warm", Images: images, PullSecret: secret}); err != nil {
		t.Fatal(err)
	}
	st := f.sink.wait(t)
	if st.Counts[StatusSucceeded] != 3 {
		t.Fatalf("status: %+v", st)
	}
	wantPulls := []pullCall{{"registry.example.com/team-a/app:1", "u-app"}, {"quay.io/coreos/etcd:v3", "u-quay"}, {"ubuntu", "hubuser"}}
	if diff := cmp.Diff(wantPulls, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	for img, hash := range map[string]string{
		"registry.example.com/team-a/app:1": "c291fe27dfd3cc624e52ad2d403ad73905146e5994ba0efb36eaacfda8e1f3a2",
		"quay.io/coreos/etcd:v3":            "e0199edf5ae22a704efdb3ad3b0eb82fac5cfd99f5a788514b48a362ac345781",
		"ubuntu":                            "bdd44c2e61ae768cb2a1aa1e94b6d9de66082e582806271d9e4e55c8738a9348",
	} {
		want := map[string]accessor.ImagePullCredentials{mappingKey(t, img): secretRecord(hash)}
		if diff := cmp.Diff(want, f.mapping(t, imageID(img))); diff != "" {
			t.Errorf("record of %s (-kubelet +got):\n%s", img, diff)
		}
	}
	res := resultsByImage(st)
	if msg := res["registry.example.com/team-a/app:1"].Message; !strings.Contains(msg, `secret ns/regcred (docker config entry "https://registry.example.com/v2/team-a/app")`) {
		t.Errorf("message %q does not name the secret and entry", msg)
	}
	if out := f.intentsLeft(t); len(out) != 0 {
		t.Errorf("intents left: %v", out)
	}

	state, err := os.ReadFile(filepath.Join(stateDir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecretMaterial(t, "the state file", string(state))
	for _, user := range []string{"u-app", "hubuser", `"Username":"u`, `"Password":"p`} {
		if strings.Contains(string(state), user) {
			t.Errorf("state file holds %q:\n%s", user, state)
		}
	}
	if !strings.Contains(string(state), `"DockerConfigPath":"`+secretDir+`"`) {
		t.Errorf("state file does not keep the path:\n%s", state)
	}
	for _, r := range st.Results {
		assertNoSecretMaterial(t, "result "+r.Request.Image, r.Message)
	}
	assertNoSecretMaterial(t, "the log", logs())

	// The state file gives the secret back as it was applied.
	loaded, err := LoadState(stateDir)
	if err != nil || len(loaded) != 1 || *loaded[0].PullSecret != *secret {
		t.Errorf("LoadState = %+v, %v; want the secret %+v", loaded, err, secret)
	}
}

// The secret is read again at every check and pull: after the kubelet
// rotates a mounted secret (a new ..data), a refresh checks with the new
// credential (the pull manager trusts the same secret object's rotated
// content and records its new hash), and once the image is gone a refresh
// pulls with it.
func TestDockerConfigRotatedSecret(t *testing.T) {
	f := newFixture(t)
	const img = "registry.example.com/app:1"
	f.images.requireAuth(img, "old:old-pass")
	secretDir := filepath.Join(t.TempDir(), "regcred")
	mountSecret(t, secretDir, map[string]string{".dockerconfigjson": `{"auths":{"registry.example.com":{"username":"old","password":"old-pass"}}}`})
	m := f.manager(t)
	run(t, m)
	ctx := context.Background()
	secret := &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: secretDir}
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{img}, PullSecret: secret}); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); st.Counts[StatusSucceeded] != 1 {
		t.Fatalf("first pull: %+v", st)
	}
	// Unchanged secret: already pulled.
	if err := m.Refresh(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); st.Counts[StatusAlreadyPulled] != 1 {
		t.Fatalf("refresh before rotation: %+v", st)
	}

	mountSecret(t, secretDir, map[string]string{".dockerconfigjson": `{"auths":{"registry.example.com":{"username":"new","password":"new-pass"}}}`})
	f.images.requireAuth(img, "new:new-pass")
	if err := m.Refresh(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); st.Counts[StatusAlreadyPulled] != 1 {
		t.Fatalf("refresh after rotation: %+v", st)
	}
	want := map[string]accessor.ImagePullCredentials{"registry.example.com/app": secretRecord(credentialHash(&PullSecret{Username: "new", Password: "new-pass"}))}
	if diff := cmp.Diff(want, f.mapping(t, imageID(img))); diff != "" {
		t.Errorf("record after the check with the rotated secret (-want +got):\n%s", diff)
	}

	// The image disappears (kubelet GC): the refresh pulls with the new
	// credential.
	if err := f.images.client.RemoveImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); st.Counts[StatusSucceeded] != 1 {
		t.Fatalf("refresh after rotation and removal: %+v", st)
	}
	if diff := cmp.Diff([]pullCall{{img, "old"}, {img, "new"}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, f.mapping(t, imageID(img))); diff != "" {
		t.Errorf("record after the pull (-want +got):\n%s", diff)
	}
}

// An image no entry of the secret matches is not pulled at all, and never
// anonymously; a broken docker config fails every image with a message
// naming the file. Neither is retried, and no intent is left.
func TestDockerConfigUnusable(t *testing.T) {
	tmp := t.TempDir()
	good := filepath.Join(tmp, "good")
	mountSecret(t, good, map[string]string{".dockerconfigjson": mainConfig})
	tests := []struct {
		name     string
		path     func() string
		image    string
		reason   string
		wantText []string
	}{
		{name: "no matching entry", path: func() string { return good }, image: "quay.io/other/x:1",
			reason: ReasonNoCredentials, wantText: []string{"pull secret ns/regcred", filepath.Join(good, ".dockerconfigjson"), "quay.io/other/x", "never pulls anonymously"}},
		{name: "missing", path: func() string { return filepath.Join(tmp, "missing") }, image: "registry.example.com/x:1",
			reason: ReasonDockerConfigError, wantText: []string{filepath.Join(tmp, "missing"), "no such file"}},
		{name: "not JSON", path: func() string { return writeFile(t, filepath.Join(tmp, "notjson"), "config.json", `{"auths": p-host`) },
			image: "registry.example.com/x:1", reason: ReasonDockerConfigError, wantText: []string{filepath.Join(tmp, "notjson", "config.json"), "not valid JSON"}},
		{name: "too large", path: func() string {
			return writeFile(t, filepath.Join(tmp, "big"), "config.json", `{"auths":{},"x":"`+strings.Repeat("p-host", maxDockerConfigSize/6+1)+`"}`)
		}, image: "registry.example.com/x:1", reason: ReasonDockerConfigError, wantText: []string{filepath.Join(tmp, "big", "config.json"), "larger than"}},
		{name: "directory without a docker config", path: func() string {
			d := filepath.Join(tmp, "opaque")
			mountSecret(t, d, map[string]string{"password": "p-host"})
			return d
		}, image: "registry.example.com/x:1", reason: ReasonDockerConfigError, wantText: []string{filepath.Join(tmp, "opaque"), "neither"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.images.preload(tc.image) // present: not even "already pulled" without a credential
			f.seed(t, tc.image, accessor.ImagePullCredentials{NodePodsAccessible: true})
			m, logs := f.loggedManager(t)
			run(t, m)
			secret := &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: tc.path()}
			if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{tc.image}, PullSecret: secret}); err != nil {
				t.Fatal(err)
			}
			st := f.sink.wait(t)
			if len(st.Results) != 1 {
				t.Fatalf("status: %+v", st)
			}
			r := st.Results[0]
			if r.Status != StatusFailed || r.Reason != tc.reason || r.Attempts != 1 {
				t.Errorf("result = %s/%s after %d attempts, want %s/%s after 1", r.Status, r.Reason, r.Attempts, StatusFailed, tc.reason)
			}
			for _, want := range tc.wantText {
				if !strings.Contains(r.Message, want) {
					t.Errorf("message %q does not contain %q", r.Message, want)
				}
			}
			assertNoSecretMaterial(t, "the message", r.Message)
			assertNoSecretMaterial(t, "the log", logs())
			if calls := f.images.pullCalls(); len(calls) != 0 {
				t.Errorf("CRI pulls: %v, want none", calls)
			}
			if calls := f.records.Calls(); len(calls) != 0 {
				t.Errorf("pull record calls: %v, want none", calls)
			}
		})
	}
}

// When several entries match, they are tried in the kubelet's order until
// one works, and the pull is recorded for the one that worked. The failure
// of all of them reads as Unauthorized only when every one was refused.
func TestDockerConfigTriesMatchingEntriesInOrder(t *testing.T) {
	const img = "registry.example.com/team-a/app:1"
	config := `{"auths":{"registry.example.com/team-a":{"username":"stale","password":"old"},"registry.example.com":{"username":"host","password":"p-host"}}}`
	tests := []struct {
		name       string
		private    string
		failures   []error
		wantStatus ImageWorkStatus
		wantReason string
		wantUsers  []string
		wantRecord string // user:password hashed in the record; "" for none
	}{
		{name: "second works", private: "host:p-host", wantStatus: StatusSucceeded, wantReason: ReasonPulled,
			wantUsers: []string{"stale", "host"}, wantRecord: "host:p-host"},
		{name: "first works", private: "stale:old", wantStatus: StatusSucceeded, wantReason: ReasonPulled,
			wantUsers: []string{"stale"}, wantRecord: "stale:old"},
		{name: "all refused", private: "nobody:x", wantStatus: StatusFailed, wantReason: ReasonUnauthorized,
			wantUsers: []string{"stale", "host"}},
		{name: "one transient failure: retried", private: "nobody:x", failures: []error{errRuntimeBusy},
			wantStatus: StatusFailed, wantReason: ReasonUnauthorized, wantUsers: []string{"stale", "host", "stale", "host"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.images.requireAuth(img, tc.private)
			f.images.fail(img, tc.failures...)
			dir := filepath.Join(t.TempDir(), "regcred")
			mountSecret(t, dir, map[string]string{".dockerconfigjson": config})
			m := f.manager(t)
			run(t, m)
			if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{img},
				PullSecret: &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: dir}}); err != nil {
				t.Fatal(err)
			}
			r := f.sink.wait(t).Results[0]
			if r.Status != tc.wantStatus || r.Reason != tc.wantReason {
				t.Errorf("result %s/%s (%s), want %s/%s", r.Status, r.Reason, r.Message, tc.wantStatus, tc.wantReason)
			}
			var users []string
			for _, c := range f.images.pullCalls() {
				users = append(users, c.User)
			}
			if diff := cmp.Diff(tc.wantUsers, users); diff != "" {
				t.Errorf("users tried (-want +got):\n%s", diff)
			}
			var want map[string]accessor.ImagePullCredentials
			if tc.wantRecord != "" {
				u, p, _ := strings.Cut(tc.wantRecord, ":")
				want = map[string]accessor.ImagePullCredentials{mappingKey(t, img): secretRecord(credentialHash(&PullSecret{Username: u, Password: p}))}
			}
			if diff := cmp.Diff(want, f.mapping(t, imageID(img))); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if r.Status == StatusFailed {
				for _, entry := range []string{`"registry.example.com/team-a"`, `"registry.example.com"`, "2 of the 2 matching credentials"} {
					if !strings.Contains(r.Message, entry) {
						t.Errorf("message %q does not mention %s", r.Message, entry)
					}
				}
			}
			if out := f.intentsLeft(t); len(out) != 0 {
				t.Errorf("intents left: %v", out)
			}
		})
	}
}

// "Already pulled" asks the pull manager with every matching credential of
// the secret, as the kubelet's getPodCredentials does: an image recorded
// for the secret's second matching entry is not pulled again.
func TestDockerConfigAlreadyPulledWithAnyMatchingEntry(t *testing.T) {
	const img = "registry.example.com/team-a/app:1"
	f := newFixture(t)
	f.images.preload(img)
	f.seed(t, img, secretRecord(credentialHash(&PullSecret{Username: "host", Password: "p-host"})))
	dir := filepath.Join(t.TempDir(), "regcred")
	mountSecret(t, dir, map[string]string{".dockerconfigjson": `{"auths":{"registry.example.com/team-a":{"username":"team","password":"t"},"registry.example.com":{"username":"host","password":"p-host"}}}`})
	m := f.manager(t)
	run(t, m)
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{img},
		PullSecret: &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: dir}}); err != nil {
		t.Fatal(err)
	}
	if r := f.sink.wait(t).Results[0]; r.Status != StatusAlreadyPulled {
		t.Errorf("result %s/%s, want alreadypulled", r.Status, r.Reason)
	}
	if calls := f.images.pullCalls(); len(calls) != 0 {
		t.Errorf("CRI pulls: %v", calls)
	}
}

// Inline credentials and a path together, or a relative path, are refused
// by Apply and Sync with ErrInvalidPullSecret (an ErrInvalidCache), before
// anything is persisted.
func TestApplyRefusesAmbiguousPullSecret(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(t.TempDir(), "state")
	m := f.manager(t, WithStateDir(dir))
	ctx := context.Background()
	for _, s := range []*PullSecret{
		{Namespace: "ns", Name: "regcred", Username: "robot", Password: "hunter2", DockerConfigPath: "/var/run/secrets/regcred"},
		{Namespace: "ns", Name: "regcred", DockerConfigPath: "relative/regcred"},
	} {
		c := ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}, PullSecret: s}
		err := m.Apply(ctx, c)
		if !errors.Is(err, ErrInvalidPullSecret) || !errors.Is(err, ErrInvalidCache) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalidPullSecret and ErrInvalidCache", *s, err)
		} else if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "ns/c") {
			t.Errorf("Apply error %q: want the cache named and no password", err)
		}
		if _, err := m.Sync(ctx, []ImageCache{c}); !errors.Is(err, ErrInvalidPullSecret) {
			t.Errorf("Sync = %v, want ErrInvalidPullSecret", err)
		}
	}
	if got := m.Caches(); len(got) != 0 {
		t.Errorf("Caches = %v, want none", got)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file written: %v", err)
	}

	// A standalone manager refuses a secret given by path like any other.
	sm := f.standalone(t)
	err := sm.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"},
		PullSecret: &PullSecret{Namespace: "ns", Name: "regcred", DockerConfigPath: "/var/run/secrets/regcred"}})
	if !errors.Is(err, ErrPrivateImage) {
		t.Errorf("standalone Apply = %v, want ErrPrivateImage", err)
	}
}

// The state file is 0600; inline passwords are in it (documented), a
// secret given by path never puts credentials there, and a manager
// restarted on the directory resumes with the path.
func TestStateFileCredentials(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	secretDir := filepath.Join(t.TempDir(), "regcred")
	mountSecret(t, secretDir, map[string]string{".dockerconfigjson": mainConfig})

	f := newFixture(t)
	m1 := f.manager(t, WithStateDir(dir)) // never run: the work stays pending
	if err := m1.Apply(ctx, ImageCache{Namespace: "ns", Name: "inline", Images: []string{"reg/a:1"}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	if err := m1.Apply(ctx, ImageCache{Namespace: "ns", Name: "path", Images: []string{"quay.io/coreos/etcd:v3"},
		PullSecret: &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: secretDir}}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, stateFile)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("state file mode %v, want 0600", mode)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"Password":"`+aliceSecret.Password+`"`) {
		t.Errorf("inline password not persisted (the documented behaviour):\n%s", data)
	}
	assertNoSecretMaterial(t, "the state file", string(data))

	f2 := newFixture(t)
	f2.images.requireAuth("quay.io/coreos/etcd:v3", "u-quay:p-quay")
	f2.images.requireAuth("reg/a:1", "alice:s3cret")
	m2 := f2.manager(t, WithStateDir(dir))
	run(t, m2)
	got := map[string]ImageWorkStatus{}
	for range 2 {
		st := f2.sink.wait(t)
		got[st.ImageCache.Name] = st.Results[0].Status
	}
	if diff := cmp.Diff(map[string]ImageWorkStatus{"inline": StatusSucceeded, "path": StatusSucceeded}, got); diff != "" {
		t.Errorf("resumed (-want +got):\n%s", diff)
	}
	want := map[string]accessor.ImagePullCredentials{"quay.io/coreos/etcd": secretRecord("e0199edf5ae22a704efdb3ad3b0eb82fac5cfd99f5a788514b48a362ac345781")}
	if diff := cmp.Diff(want, f2.mapping(t, imageID("quay.io/coreos/etcd:v3"))); diff != "" {
		t.Errorf("record after resume (-want +got):\n%s", diff)
	}
}

// Whatever reaches writeState, a secret given by path is written without
// inline fields, and the caller's value is left alone.
func TestWriteStateDropsInlineFieldsOfPathSecrets(t *testing.T) {
	dir := t.TempDir()
	s := &PullSecret{Namespace: "ns", Name: "regcred", Username: "robot", Password: "hunter2", Email: "e@x", DockerConfigPath: "/run/regcred"}
	p := &persisted{Version: stateVersion, Caches: []persistedCache{
		{Namespace: "ns", Name: "a", Images: []string{"x"}, PullSecret: aliceSecret},
		{Namespace: "ns", Name: "b", Images: []string{"x"}, PullSecret: s},
	}}
	if err := writeState(dir, p); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"hunter2", "robot", "e@x"} {
		if strings.Contains(string(data), bad) {
			t.Errorf("state file holds %q:\n%s", bad, data)
		}
	}
	if !strings.Contains(string(data), aliceSecret.Password) || !strings.Contains(string(data), "/run/regcred") {
		t.Errorf("state file lost the inline secret or the path:\n%s", data)
	}
	if s.Password != "hunter2" || p.Caches[1].PullSecret != s {
		t.Error("writeState changed its argument")
	}
}

// The failure of several credentials is classified by the error most worth
// acting on: a transient one (retried), else one that is not a refusal of
// the credentials, and Unauthorized only when every credential was refused.
func TestPullAttemptsErrorClassification(t *testing.T) {
	refused := &serviceError{msg: "401", unauthorized: true}
	notFound := &serviceError{msg: "manifest unknown"}
	timeout := &serviceError{msg: "deadline", timeout: true, transient: true}
	for _, tc := range []struct {
		name                              string
		errs                              []error
		unauthorized, timedOut, transient bool
	}{
		{"all refused", []error{refused, refused}, true, false, false},
		{"refused then transient", []error{refused, errUnavailable}, false, false, true},
		{"refused then not found", []error{refused, notFound}, false, false, false},
		{"not found then timeout", []error{notFound, timeout}, false, true, true},
	} {
		cands := make([]pullCredential, len(tc.errs))
		for i := range cands {
			cands[i].entry = "entry-" + string(rune('a'+i))
		}
		err := newPullAttemptsError(cands, tc.errs)
		if IsUnauthorized(err) != tc.unauthorized || IsTimeout(err) != tc.timedOut || IsTransient(err) != tc.transient {
			t.Errorf("%s: unauthorized %t, timeout %t, transient %t; want %t, %t, %t", tc.name,
				IsUnauthorized(err), IsTimeout(err), IsTransient(err), tc.unauthorized, tc.timedOut, tc.transient)
		}
		for i, e := range tc.errs {
			if !strings.Contains(err.Error(), `"`+cands[i].entry+`": `+e.Error()) {
				t.Errorf("%s: message %q does not list entry %s", tc.name, err, cands[i].entry)
			}
		}
	}
}
