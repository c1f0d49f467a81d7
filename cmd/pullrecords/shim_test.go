package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/critest"
)

// originRegistry is a registry's manifest endpoint, as the shim's origin
// check sees it: a repository under private/ needs robot:s3cret (Basic),
// anything else is open. It answers a manifest HEAD with the digest the
// fake runtime gives the same reference, as a real origin and the runtime
// it fed would agree. It counts the requests it got.
type originRegistry struct {
	srv *httptest.Server

	mu         sync.Mutex
	requests   int
	authorized int // manifest requests that carried a credential
}

func startOriginRegistry(t *testing.T) *originRegistry {
	t.Helper()
	o := &originRegistry{}
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *originRegistry) host() string { return strings.TrimPrefix(o.srv.URL, "http://") }

func (o *originRegistry) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests
}

func (o *originRegistry) authorizedManifestRequests() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.authorized
}

func (o *originRegistry) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.requests++
	if r.Header.Get("Authorization") != "" && strings.Contains(r.URL.Path, "/manifests/") {
		o.authorized++
	}
	o.mu.Unlock()
	if r.URL.Path == "/v2/" {
		w.WriteHeader(http.StatusOK)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	var repo, ref string
	if i := strings.LastIndex(rest, "/manifests/"); ok && i >= 0 {
		repo, ref = rest[:i], rest[i+len("/manifests/"):]
	} else if i := strings.LastIndex(rest, "/blobs/"); ok && i >= 0 {
		repo, ref = rest[:i], "blob:"+rest[i+len("/blobs/"):]
	}
	if repo == "" || (r.Method != http.MethodHead && r.Method != http.MethodGet) {
		http.NotFound(w, r)
		return
	}
	if strings.HasPrefix(repo, "private/") {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="origin"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	if blob, ok := strings.CutPrefix(ref, "blob:"); ok {
		if blob != fakeConfigDigest(repo) {
			http.NotFound(w, r)
			return
		}
		w.Write(fakeConfig(repo))
		return
	}
	body := fakeManifest(repo)
	if strings.HasPrefix(ref, "sha256:") && ref != sha256Of(body) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	w.Header().Set("Docker-Content-Digest", sha256Of(body))
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

// fakeConfig is the config blob of repo's one image.
func fakeConfig(repo string) []byte { return []byte(`{"os":"linux","repo":"` + repo + `"}`) }

func fakeConfigDigest(repo string) string { return sha256Of(fakeConfig(repo)) }

// fakeManifest is the OCI manifest of repo's one image: its config, no
// layers, so that a proof without the node's content fetches one blob.
func fakeManifest(repo string) []byte {
	return []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"` +
		fakeConfigDigest(repo) + `","size":` + strconv.Itoa(len(fakeConfig(repo))) + `},"layers":[]}`)
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// runningShim is "pullrecords shim" run in this process.
type runningShim struct {
	stop   context.CancelFunc
	done   chan int
	stderr *bytes.Buffer
	client runtimeapi.ImageServiceClient
}

// startShim runs "pullrecords shim" with args in front of runtimeEndpoint,
// serving on dir/shim.sock with its state in dir/state, and returns once
// the socket answers.
func startShim(t *testing.T, dir, runtimeEndpoint string, args ...string) *runningShim {
	t.Helper()
	sock := filepath.Join(dir, "shim.sock")
	ctx, cancel := context.WithCancel(context.Background())
	s := &runningShim{stop: cancel, done: make(chan int, 1), stderr: &bytes.Buffer{}}
	full := append([]string{"--kubelet-dir", filepath.Join(dir, "kubelet"), "shim",
		"--listen", "unix://" + sock, "--runtime-endpoint", runtimeEndpoint,
		"--state-dir", filepath.Join(dir, "state"), "--metrics-addr", ""}, args...)
	go func() { s.done <- run(ctx, full, &bytes.Buffer{}, s.stderr) }()
	t.Cleanup(func() { s.shutdown(t) })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.client = runtimeapi.NewImageServiceClient(conn)
	// Wait for the socket: a call that fails fast until it is there, each
	// bounded, at most 200 times.
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = s.client.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{}, grpc.WaitForReady(true))
			ccancel()
			if err == nil || status.Code(err) == codes.Unimplemented {
				return s
			}
		}
		select {
		case code := <-s.done:
			t.Fatalf("pullrecords shim exited with %d before serving: %s", code, s.stderr)
		case <-time.After(25 * time.Millisecond):
		}
		if i == 200 {
			t.Fatalf("pullrecords shim did not serve %s: %s", sock, s.stderr)
		}
	}
}

// shutdown stops the shim as SIGTERM would and checks it exited 0.
func (s *runningShim) shutdown(t *testing.T) {
	t.Helper()
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	if code := <-s.done; code != 0 {
		t.Errorf("pullrecords shim exited with %d: %s", code, s.stderr)
	}
}

func pull(ctx context.Context, c runtimeapi.ImageServiceClient, image string, auth *runtimeapi.AuthConfig, ns string) error {
	_, err := c.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: image},
		Auth:  auth,
		SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{
			Name: "pod-" + ns, Namespace: ns, Uid: "uid-" + ns,
		}},
	})
	return err
}

// The runtime behind the shim is a mirror: it pulls anything without
// credentials. Through the shim, only a credential the origin accepts
// gets a private image, the verification is remembered across a restart,
// and the state directory passes fsck.
func TestShimVerifiesAtTheOrigin(t *testing.T) {
	origin := startOriginRegistry(t)
	mirror := critest.NewImageService() // pulls everything: the bypass
	runtimeEndpoint := mirror.Serve(t)
	dir := t.TempDir()
	private := origin.host() + "/private/app:v1"
	public := origin.host() + "/library/tool:v1"
	good := &runtimeapi.AuthConfig{Username: "robot", Password: "s3cret", ServerAddress: origin.host()}
	bad := &runtimeapi.AuthConfig{Username: "robot", Password: "guess", ServerAddress: origin.host()}
	elsewhere := &runtimeapi.AuthConfig{Username: "robot", Password: "s3cret", ServerAddress: "other.example:5000"}
	ctx := context.Background()

	// The runtime pulls what the origin serves: the manifests' digests.
	for image, repo := range map[string]string{private: "private/app", public: "library/tool"} {
		if err := mirror.SetDigest(image, sha256Of(fakeManifest(repo))); err != nil {
			t.Fatal(err)
		}
	}
	shim := startShim(t, dir, runtimeEndpoint, "--insecure-registry", origin.host())
	for _, c := range []struct {
		name string
		auth *runtimeapi.AuthConfig
	}{{"no credential", nil}, {"wrong password", bad}, {"credential for another registry", elsewhere}} {
		err := pull(ctx, shim.client, private, c.auth, "tenant-b")
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), origin.host()) {
			t.Errorf("%s: PullImage(%s) = %v; want PermissionDenied naming the origin %s", c.name, private, err, origin.host())
		}
		if strings.Contains(fmt.Sprint(err), "guess") || strings.Contains(fmt.Sprint(err), "s3cret") {
			t.Errorf("%s: the refusal shows a password: %v", c.name, err)
		}
	}
	if n := pullCalls(mirror); n != 0 {
		t.Fatalf("the runtime got %d pulls of refused requests, want 0", n)
	}

	if err := pull(ctx, shim.client, private, good, "tenant-a"); err != nil {
		t.Fatalf("PullImage(%s) with the right credential: %v", private, err)
	}
	if err := pull(ctx, shim.client, public, nil, "tenant-c"); err != nil {
		t.Fatalf("PullImage(%s) anonymously: %v", public, err)
	}
	asked := origin.count()
	// The private image is on the node now: its digest is known, and the
	// verification is remembered.
	if err := pull(ctx, shim.client, private, good, "tenant-a"); err != nil {
		t.Fatalf("second PullImage(%s): %v", private, err)
	}
	if got := origin.count(); got != asked {
		t.Errorf("a remembered verification asked the origin %d more times, want 0", got-asked)
	}
	// Present on the node does not mean verified: tenant-b is refused again.
	if err := pull(ctx, shim.client, private, nil, "tenant-b"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("PullImage(%s) without a credential after tenant-a's pull = %v, want PermissionDenied", private, err)
	}

	// Restart: the verification survives in the state directory.
	shim.shutdown(t)
	shim = startShim(t, dir, runtimeEndpoint, "--insecure-registry", origin.host())
	asked = origin.count()
	if err := pull(ctx, shim.client, private, good, "tenant-a"); err != nil {
		t.Fatalf("PullImage(%s) after a restart: %v", private, err)
	}
	if got := origin.count(); got != asked {
		t.Errorf("after a restart the remembered verification asked the origin %d times, want 0", got-asked)
	}
	shim.shutdown(t)

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"--kubelet-dir", filepath.Join(dir, "state"), "fsck"}, &out, &errOut); code != 0 {
		t.Errorf("fsck of the shim's state directory exited %d: %s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(ctx, []string{"--kubelet-dir", filepath.Join(dir, "state"), "ls"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "private/app") {
		t.Errorf("ls of the shim's state directory = %d, %q; want the verified image listed", code, out.String())
	}
}

// An origin that cannot be reached refuses the pull (fail closed), unless
// its registry is --mirror-only.
func TestShimFailsClosed(t *testing.T) {
	mirror := critest.NewImageService()
	runtimeEndpoint := mirror.Serve(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	_ = l.Close() // nothing listens there now
	ctx := context.Background()

	shim := startShim(t, t.TempDir(), runtimeEndpoint, "--insecure-registry", gone)
	err = pull(ctx, shim.client, gone+"/private/app:v1", &runtimeapi.AuthConfig{Username: "robot", Password: "s3cret"}, "tenant-a")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), gone) {
		t.Errorf("PullImage from an unreachable origin = %v; want Unavailable naming %s", err, gone)
	}
	if n := pullCalls(mirror); n != 0 {
		t.Errorf("the runtime got %d pulls from an unreachable origin, want 0", n)
	}
	shim.shutdown(t)

	shim = startShim(t, t.TempDir(), runtimeEndpoint, "--mirror-only", gone)
	if err := pull(ctx, shim.client, gone+"/private/app:v1", nil, "tenant-b"); err != nil {
		t.Errorf("PullImage from a --mirror-only registry = %v, want it forwarded", err)
	}
	if n := pullCalls(mirror); n != 1 {
		t.Errorf("the runtime got %d pulls from the --mirror-only registry, want 1", n)
	}
}

// pullCalls counts the PullImage calls the fake runtime got.
func pullCalls(f *critest.ImageService) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == critest.PullImage {
			n++
		}
	}
	return n
}

// freeAddr returns a 127.0.0.1 address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// 1,000 concurrent pulls of one private image by digest with one
// credential make one verification at the origin: the first is checked,
// the rest share its flight or find its stamp. /healthz answers and
// /metrics counts what happened.
func TestShimConcurrentPullsOneVerification(t *testing.T) {
	origin := startOriginRegistry(t)
	mirror := critest.NewImageService()
	runtimeEndpoint := mirror.Serve(t)
	metrics := freeAddr(t)
	shim := startShim(t, t.TempDir(), runtimeEndpoint, "--insecure-registry", origin.host(), "--metrics-addr", metrics)
	d := sha256Of(fakeManifest("private/app"))
	image := origin.host() + "/private/app@" + d
	good := &runtimeapi.AuthConfig{Username: "robot", Password: "s3cret"}

	const pulls = 1000
	errs := make(chan error, pulls)
	var wg sync.WaitGroup
	for range pulls {
		wg.Go(func() { errs <- pull(context.Background(), shim.client, image, good, "tenant-a") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("PullImage(%s): %v", image, err)
		}
	}
	if got := origin.authorizedManifestRequests(); got != 1 {
		t.Errorf("%d concurrent pulls made %d credentialed manifest requests at the origin, want 1", pulls, got)
	}

	get := func(path string) string {
		resp, err := http.Get("http://" + metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b.String())
		}
		return b.String()
	}
	if got := get("/healthz"); got != "ok\n" {
		t.Errorf("/healthz = %q, want ok", got)
	}
	m := get("/metrics")
	for _, want := range []string{
		`pullrecords_shim_verifications_total{result="accepted"} 1`,
		`pullrecords_shim_forwarded_calls_total{code="OK",method="/runtime.v1.ImageService/PullImage"} 1000`,
		"pullrecords_shim_remembered_total",
		"pullrecords_shim_origin_request_seconds_count 1",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(m, "s3cret") {
		t.Error("/metrics shows the password")
	}
}
