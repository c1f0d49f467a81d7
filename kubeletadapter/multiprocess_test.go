//go:build linux

package kubeletadapter_test

// The multi-process proof of "safe beside a live kubelet".
//
// A stock kubelet's pull manager (upstream's real code, built as
// kuberuntime_manager.go builds it) runs in a child process, the test binary
// re-executed with PULLRECORDS_MP_ROLE set, and answers JSON lines on
// stdin/stdout. It stays running across rounds, so its in-memory cache is
// authoritative the whole time, except when the test kills it with SIGKILL
// and starts it again (a kubelet crash and restart). Beside it, the real
// pullrecords binary does what operators and image caches do: read-only
// commands while the kubelet works, anonymous pre-pulls into the runtime,
// and writing commands that must refuse; some of them are killed with
// SIGKILL at random points. After every round the upstream side is asked,
// for every image on the node and every kind of pod, whether the pod must
// pull, and no pod may be told "no pull needed" for a private image it
// holds no credentials for, unless the policy exempts the image.
//
// TestMultiProcessCRIDirectPrivatePullLeaks shows why the other processes
// must stay read-only: a record written beside the running kubelet (which
// takes no lock) is invisible to its authoritative cache, and the image
// looks preloaded until the kubelet restarts.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dockerref "github.com/distribution/reference"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/credentialprovider"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"
	"k8s.io/utils/ptr"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

var (
	mpRoundsFlag = flag.Int("mp.rounds", 30, "rounds of TestMultiProcessBesideLiveKubelet")
	mpSeedFlag   = flag.Int64("mp.seed", 0, "seed of TestMultiProcessBesideLiveKubelet (0: from the clock; the seed used is printed)")
	mpBinFlag    = flag.String("mp.pullrecords", "", "the pullrecords binary to run beside the kubelet (default: build ../cmd/pullrecords)")
)

// Environment of a helper process.
const (
	mpEnvRole    = "PULLRECORDS_MP_ROLE" // "upstream" or "library"
	mpEnvDir     = "PULLRECORDS_MP_KUBELET_DIR"
	mpEnvRuntime = "PULLRECORDS_MP_RUNTIME_DIR"
	mpEnvPolicy  = "PULLRECORDS_MP_POLICY"
)

// mpMaxPods is the kubelet's default maxPods.
const mpMaxPods int32 = 110

// ---------------------------------------------------------------------------
// The container runtime: a file shared by every process (the kubelet, the
// test standing in for an image cache, a CRI-direct puller). Image IDs come
// from the normalised name with its tag, so "pubimg:1" and
// "docker.io/library/pubimg:1" are one image, as in a real runtime.

type mpRuntime struct{ dir string }

type mpRuntimeState struct {
	Images map[string][]string `json:"images"` // image ID -> names
}

func mpImageID(name string) string {
	content := name
	if named, err := dockerref.ParseNormalizedNamed(name); err == nil {
		content = dockerref.TagNameOnly(named).String()
	}
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (r *mpRuntime) read() (*mpRuntimeState, error) {
	s := &mpRuntimeState{Images: map[string][]string{}}
	b, err := os.ReadFile(filepath.Join(r.dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	if s.Images == nil {
		s.Images = map[string][]string{}
	}
	return s, nil
}

// update changes the state under an exclusive flock; fn reports whether it
// changed anything. The new state replaces the old by rename, so readers
// never need the lock.
func (r *mpRuntime) update(fn func(s *mpRuntimeState) bool) error {
	lock, err := os.OpenFile(filepath.Join(r.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	s, err := r.read()
	if err != nil {
		return err
	}
	if !fn(s) {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := filepath.Join(r.dir, fmt.Sprintf("state.%d.tmp", os.Getpid()))
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(r.dir, "state.json"))
}

// add puts name on the node (a pull) and returns its image ID.
func (r *mpRuntime) add(name string) (string, error) {
	id := mpImageID(name)
	err := r.update(func(s *mpRuntimeState) bool {
		for _, n := range s.Images[id] {
			if n == name {
				return false
			}
		}
		s.Images[id] = append(s.Images[id], name)
		return true
	})
	return id, err
}

// remove deletes the image name resolves to, with all its names.
func (r *mpRuntime) remove(name string) error {
	id := mpImageID(name)
	return r.update(func(s *mpRuntimeState) bool {
		if _, ok := s.Images[id]; !ok {
			return false
		}
		delete(s.Images, id)
		return true
	})
}

// ref is the image ID of name when the node has it, else "".
func (r *mpRuntime) ref(name string) (string, error) {
	s, err := r.read()
	if err != nil {
		return "", err
	}
	id := mpImageID(name)
	if _, ok := s.Images[id]; ok {
		return id, nil
	}
	return "", nil
}

func (r *mpRuntime) ids() ([]string, error) {
	s, err := r.read()
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(s.Images))
	for id := range s.Images {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// mpImageService is the runtime as the kubelet's pull manager sees it.
type mpImageService struct{ rt *mpRuntime }

var _ kubecontainer.ImageService = mpImageService{}

func (s mpImageService) PullImage(context.Context, kubecontainer.ImageSpec, []credentialprovider.TrackedAuthConfig, *runtimeapi.PodSandboxConfig) (string, *credentialprovider.TrackedAuthConfig, error) {
	return "", nil, errors.New("the pull manager does not pull")
}

func (s mpImageService) GetImageRef(_ context.Context, image kubecontainer.ImageSpec) (string, error) {
	return s.rt.ref(image.Image)
}

func (s mpImageService) ListImages(context.Context) ([]kubecontainer.Image, error) {
	st, err := s.rt.read()
	if err != nil {
		return nil, err
	}
	out := make([]kubecontainer.Image, 0, len(st.Images))
	for id, names := range st.Images {
		out = append(out, kubecontainer.Image{ID: id, RepoTags: append([]string(nil), names...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s mpImageService) RemoveImage(_ context.Context, image kubecontainer.ImageSpec) error {
	return s.rt.remove(image.Image)
}

func (s mpImageService) ImageStats(context.Context) (*kubecontainer.ImageStats, error) {
	return &kubecontainer.ImageStats{}, nil
}

func (s mpImageService) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (s mpImageService) GetImageSize(context.Context, kubecontainer.ImageSpec) (uint64, error) {
	return 0, nil
}

// ---------------------------------------------------------------------------
// The protocol between the test and a helper process: one JSON command per
// line on stdin, JSON responses per line on stdout. Every command ends with
// a "done" response; a pull also reports "intent" once its intent is on disk.

type mpSecret struct {
	NS   string `json:"ns"`
	Name string `json:"name"`
	UID  string `json:"uid"`
	Hash string `json:"hash"`
}

func (s mpSecret) kubelet() kubeletconfig.ImagePullSecret {
	return kubeletconfig.ImagePullSecret{UID: s.UID, Namespace: s.NS, Name: s.Name, CredentialHash: s.Hash}
}

type mpCmd struct {
	ID      int        `json:"id"`
	Op      string     `json:"op"` // pull, fail, check, gc, prune
	Image   string     `json:"image,omitempty"`
	Secret  *mpSecret  `json:"secret,omitempty"` // pull: the credential used; nil is anonymous
	Pod     []mpSecret `json:"pod,omitempty"`    // check: the pod's pull secrets
	DelayUS int        `json:"delayUs,omitempty"`
}

type mpResp struct {
	ID      int    `json:"id"`
	Stage   string `json:"stage"` // ready, intent, done
	PID     int    `json:"pid,omitempty"`
	Ref     string `json:"ref,omitempty"`
	Present bool   `json:"present,omitempty"`
	Must    bool   `json:"must,omitempty"`
	Err     string `json:"err,omitempty"`
}

// TestMPHelperProcess is not a test: it is the body of the helper
// processes the multi-process tests start by running the test binary again.
func TestMPHelperProcess(t *testing.T) {
	role := os.Getenv(mpEnvRole)
	if role == "" {
		t.Skip("helper process of the multi-process tests")
	}
	var err error
	switch role {
	case "upstream":
		err = mpServeUpstream()
	case "library":
		err = mpServeLibrary()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func mpServe(handle func(c mpCmd, emit func(mpResp)) mpResp) error {
	enc := json.NewEncoder(os.Stdout)
	emit := func(r mpResp) {
		if err := enc.Encode(r); err != nil {
			os.Exit(4)
		}
	}
	emit(mpResp{Stage: "ready", PID: os.Getpid()})
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c mpCmd
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return err
		}
		r := handle(c, func(r mpResp) { r.ID = c.ID; emit(r) })
		r.ID, r.Stage = c.ID, "done"
		emit(r)
	}
	return sc.Err()
}

// mpServeUpstream runs a stock kubelet's pull manager: upstream's own fs
// accessor, cache and manager, built exactly as kuberuntime_manager.go of
// v1.37.2 builds them, with maxPods 110 and serialised image pulls
// (maxParallelImagePulls unset).
func mpServeUpstream() error {
	logger := klog.Background()
	ctx := klog.NewContext(context.Background(), logger)
	rootDirectory := os.Getenv(mpEnvDir)
	rt := &mpRuntime{dir: os.Getenv(mpEnvRuntime)}
	policy := kubeletconfig.ImagePullCredentialsVerificationPolicy(os.Getenv(mpEnvPolicy))

	imagePullCredentialsVerificationPolicy, err := upstream.NewImagePullCredentialVerificationPolicy(policy, nil)
	if err != nil {
		return err
	}
	fsRecordAccessor, err := upstream.NewFSPullRecordsAccessor(logger, rootDirectory)
	if err != nil {
		return fmt.Errorf("failed to setup the FSPullRecordsAccessor: %w", err)
	}
	var maxParallelImagePulls *int32 // serializeImagePulls: true
	var (
		maxParallelPulls     = ptr.Deref(maxParallelImagePulls, 0)
		intentCacheSize      = max(2*mpMaxPods, 2*maxParallelPulls)
		pullRecordsCacheSize = 5 * mpMaxPods
	)
	memCacheRecordsAccessor := upstream.NewCachedPullRecordsAccessor(logger, fsRecordAccessor, intentCacheSize, pullRecordsCacheSize, maxParallelPulls)
	m, err := upstream.NewImagePullManager(ctx, memCacheRecordsAccessor, imagePullCredentialsVerificationPolicy, mpImageService{rt}, maxParallelPulls)
	if err != nil {
		return err
	}

	return mpServe(func(c mpCmd, emit func(mpResp)) mpResp {
		switch c.Op {
		case "pull", "fail":
			// As the kubelet's image manager: the intent, the pull, then
			// the record (or the failure).
			if err := m.RecordPullIntent(logger, c.Image); err != nil {
				return mpResp{Err: err.Error()}
			}
			emit(mpResp{Stage: "intent"})
			time.Sleep(time.Duration(c.DelayUS) * time.Microsecond)
			if c.Op == "fail" {
				m.RecordImagePullFailed(ctx, c.Image)
				return mpResp{}
			}
			ref, err := rt.add(c.Image)
			if err != nil {
				m.RecordImagePullFailed(ctx, c.Image)
				return mpResp{Err: err.Error()}
			}
			creds := &kubeletconfig.ImagePullCredentials{NodePodsAccessible: true}
			if c.Secret != nil {
				creds = &kubeletconfig.ImagePullCredentials{KubernetesSecrets: []kubeletconfig.ImagePullSecret{c.Secret.kubelet()}}
			}
			m.RecordImagePulled(ctx, c.Image, ref, creds)
			return mpResp{Ref: ref}
		case "check":
			ref, err := rt.ref(c.Image)
			if err != nil {
				return mpResp{Err: err.Error()}
			}
			if ref == "" {
				return mpResp{}
			}
			secrets := make([]kubeletconfig.ImagePullSecret, len(c.Pod))
			for i, s := range c.Pod {
				secrets[i] = s.kubelet()
			}
			must, err := m.MustAttemptImagePull(ctx, c.Image, ref, func() ([]kubeletconfig.ImagePullSecret, *kubeletconfig.ImagePullServiceAccount, error) {
				return secrets, nil, nil
			})
			r := mpResp{Ref: ref, Present: true, Must: must}
			if err != nil {
				r.Err = err.Error()
			}
			return r
		case "gc", "prune":
			// As the image GC manager: the cut-off first, then the
			// removal, then the post-GC hook with the remaining images.
			until := time.Now()
			if c.Op == "gc" {
				if err := rt.remove(c.Image); err != nil {
					return mpResp{Err: err.Error()}
				}
			}
			ids, err := rt.ids()
			if err != nil {
				return mpResp{Err: err.Error()}
			}
			m.PruneUnknownRecords(ctx, ids, until)
			return mpResp{}
		}
		return mpResp{Err: "unknown op " + c.Op}
	})
}

// mpServeLibrary is a process that pulls through the CRI directly and
// records the pull with this library's writable fsstore, as an image cache
// outside the kubelet would if nothing stopped it.
func mpServeLibrary() error {
	logger := klog.Background()
	rt := &mpRuntime{dir: os.Getenv(mpEnvRuntime)}
	store, err := fsstore.New(logger, os.Getenv(mpEnvDir))
	if err != nil {
		return err
	}
	defer store.Close()
	return mpServe(func(c mpCmd, _ func(mpResp)) mpResp {
		if c.Op != "pull" || c.Secret == nil {
			return mpResp{Err: "the library helper only pulls with a secret"}
		}
		if err := store.WriteImagePullIntent(logger, c.Image); err != nil {
			return mpResp{Err: err.Error()}
		}
		ref, err := rt.add(c.Image)
		if err != nil {
			return mpResp{Err: err.Error()}
		}
		key, err := mpMappingKey(c.Image)
		if err != nil {
			return mpResp{Err: err.Error()}
		}
		rec := &accessor.ImagePulledRecord{
			LastUpdatedTime: accessor.StorageTime(time.Now()),
			ImageRef:        ref,
			CredentialMapping: map[string]accessor.ImagePullCredentials{key: {KubernetesSecrets: []accessor.ImagePullSecret{{
				UID: c.Secret.UID, Namespace: c.Secret.NS, Name: c.Secret.Name, CredentialHash: c.Secret.Hash,
			}}}},
		}
		if err := store.WriteImagePulledRecord(logger, rec); err != nil {
			return mpResp{Err: err.Error()}
		}
		if err := store.DeleteImagePullIntent(logger, c.Image); err != nil {
			return mpResp{Err: err.Error()}
		}
		return mpResp{Ref: ref}
	})
}

// mpMappingKey is the kubelet's credential mapping key: the raw image string
// with its tag and digest cut.
func mpMappingKey(image string) (string, error) {
	ref, err := dockerref.Parse(image)
	if err != nil {
		return "", err
	}
	key := image
	if d, ok := ref.(dockerref.Digested); ok {
		key = strings.TrimSuffix(key, "@"+d.Digest().String())
	}
	if t, ok := ref.(dockerref.Tagged); ok {
		key = strings.TrimSuffix(key, ":"+t.Tag())
	}
	return key, nil
}

// ---------------------------------------------------------------------------
// Helper processes seen from the test.

type mpProc struct {
	t      *testing.T
	policy kubeletconfig.ImagePullCredentialsVerificationPolicy
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan mpResp
	stderr *mpTail
	pid    int
	nextID int
	exited bool
}

// mpTail keeps the end of a helper's stderr, for failure messages.
type mpTail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *mpTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 32<<10 {
		w.buf = append([]byte(nil), w.buf[len(w.buf)-16<<10:]...)
	}
	return len(p), nil
}

func (w *mpTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

func mpStart(t *testing.T, role, dir, rtDir string, policy kubeletconfig.ImagePullCredentialsVerificationPolicy) *mpProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMPHelperProcess$")
	cmd.Env = append(os.Environ(),
		mpEnvRole+"="+role, mpEnvDir+"="+dir, mpEnvRuntime+"="+rtDir, mpEnvPolicy+"="+string(policy))
	p := &mpProc{t: t, policy: policy, cmd: cmd, out: make(chan mpResp, 4096), stderr: &mpTail{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var r mpResp
			if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &r) == nil {
				p.out <- r
			}
		}
		close(p.out)
	}()
	t.Cleanup(func() {
		if !p.exited {
			_ = p.cmd.Process.Kill()
			p.drainAndWait()
		}
	})
	r, ok := p.next()
	if !ok || r.Stage != "ready" {
		t.Fatalf("%s helper did not start: %+v\n%s", role, r, p.stderr)
	}
	p.pid = r.PID
	return p
}

// next is the next response, or false once the process has exited.
func (p *mpProc) next() (mpResp, bool) {
	p.t.Helper()
	select {
	case r, ok := <-p.out:
		return r, ok
	case <-time.After(2 * time.Minute):
		p.t.Fatalf("helper %d does not answer\n%s", p.pid, p.stderr)
		return mpResp{}, false
	}
}

// send writes c with a fresh ID and returns it. A dead process is not an
// error here: its missing answer is.
func (p *mpProc) send(c mpCmd) int {
	p.nextID++
	c.ID = p.nextID
	b, err := json.Marshal(c)
	if err != nil {
		p.t.Fatal(err)
	}
	_, _ = p.stdin.Write(append(b, '\n'))
	return c.ID
}

// do runs c and returns its "done" response; onIntent runs when a pull's
// intent is on disk.
func (p *mpProc) do(c mpCmd, onIntent func()) mpResp {
	p.t.Helper()
	id := p.send(c)
	for {
		r, ok := p.next()
		if !ok {
			p.t.Fatalf("helper %d exited during %+v\n%s", p.pid, c, p.stderr)
		}
		if r.ID != id {
			p.t.Fatalf("helper %d answered %+v to command %d", p.pid, r, id)
		}
		if r.Err != "" {
			p.t.Fatalf("helper %d: %+v: %s\n%s", p.pid, c, r.Err, p.stderr)
		}
		switch r.Stage {
		case "intent":
			if onIntent != nil {
				onIntent()
			}
		case "done":
			return r
		}
	}
}

func (p *mpProc) drainAndWait() {
	for range p.out {
	}
	_ = p.cmd.Wait()
	p.exited = true
}

// kill is kill -9.
func (p *mpProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.drainAndWait()
}

// stop ends the process cleanly (stdin closed) and checks it exited 0.
func (p *mpProc) stop() {
	p.t.Helper()
	_ = p.stdin.Close()
	p.drainAndWait()
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("helper %d exited %d\n%s", p.pid, code, p.stderr)
	}
}

// ---------------------------------------------------------------------------
// The pullrecords binary.

// mpPullrecords returns the pullrecords binary: -mp.pullrecords, or one
// built from ../cmd/pullrecords in the repository's workspace into the
// test's temporary directory.
func mpPullrecords(t *testing.T) string {
	t.Helper()
	if *mpBinFlag != "" {
		p, err := filepath.Abs(*mpBinFlag)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "pullrecords")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/pullrecords")
	cmd.Dir = root
	// The command is a module of the workspace, which this module is not
	// part of (it runs with GOWORK=off).
	cmd.Env = append(mpEnvWithout(os.Environ(), "GOWORK"), "GOWORK="+filepath.Join(root, "go.work"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pullrecords: %v\n%s", err, out)
	}
	return bin
}

func mpEnvWithout(env []string, names ...string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

type mpCLI struct {
	bin, dir string
}

type mpResult struct {
	args           []string
	stdout, stderr string
	code           int
	killed         bool
}

func (r mpResult) String() string {
	return fmt.Sprintf("pullrecords %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// run runs pullrecords with --kubelet-dir, a running-kubelet check that
// reads procRoot only (no healthz probe), and SIGKILL after killAfter when
// killAfter is not negative.
// It may run on any goroutine.
func (c *mpCLI) run(procRoot string, killAfter time.Duration, args ...string) mpResult {
	// An empty healthz variable now means the default endpoint; the flag,
	// set empty, still skips the probe (never the process scan).
	full := append([]string{"--kubelet-dir", c.dir, "--kubelet-healthz-url="}, args...)
	cmd := exec.Command(c.bin, full...)
	cmd.Env = append(mpEnvWithout(os.Environ(), "PULLRECORDS_PROC_ROOT", "PULLRECORDS_KUBELET_HEALTHZ_URL", mpEnvRole),
		"PULLRECORDS_PROC_ROOT="+procRoot, "PULLRECORDS_KUBELET_HEALTHZ_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return mpResult{args: args, stderr: err.Error(), code: -1}
	}
	if killAfter >= 0 {
		timer := time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	_ = cmd.Wait()
	r := mpResult{args: args, stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		r.killed = true
	}
	return r
}

// ---------------------------------------------------------------------------
// The node: tenants, images, and what the test knows of the kubelet's pulls.

var (
	mpHashA    = mpHash("tenant-a registry credential")
	mpHashARot = mpHash("tenant-a registry credential, rotated")
	mpHashB    = mpHash("tenant-b registry credential")
)

func mpHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// mpPod is a kind of pod: its tenant and pull secrets.
type mpPod struct {
	name    string
	tenant  string // "a", "b", or "" for a pod without pull secrets
	secrets []mpSecret
}

// mpImage is an image the pods of the node ask for.
type mpImage struct {
	name      string
	owner     string // "a" or "b": only that tenant's credentials can pull it; "": public
	preloaded bool   // on the node before the kubelet starts, and pinned (image GC keeps it)
	neverPull bool   // no pod ever has the kubelet pull it
}

var mpCatalogue = []mpImage{
	{name: "priv.example/a/app:1", owner: "a"},
	{name: "priv.example/a/app:2", owner: "a"},
	{name: "priv.example/a/base:1", owner: "a", preloaded: true},
	{name: "priv.example/a/golden:1", owner: "a", preloaded: true, neverPull: true},
	{name: "priv.example/b/app:1", owner: "b"},
	{name: "priv.example/b/base:1", owner: "b", preloaded: true},
	{name: "pubimg:1", preloaded: true},
	{name: "docker.io/library/pubimg:1"},
	{name: "docker.io/pub/tools:2"},
	{name: "pub/tools:3"},
}

// canPull says whether pod could pull img from its registry itself: then
// "no pull needed" hides nothing from it.
func mpCanPull(p mpPod, img mpImage) bool {
	return img.owner == "" || img.owner == p.tenant
}

type mpStats struct {
	rounds                          int
	roundsByPolicy                  map[string]int
	ops, pulls, checks              int
	upstreamKills, killsMidBatch    int
	killsAtIntent                   int
	kubeletLifetime                 int // the most rounds one kubelet process served
	upstreamRestarts                int
	pullrecordsRuns                 int
	pullrecordsKills                int
	refusals                        int
	anonymousPrePulls               int
	decisions, exempt, noPullNeeded int
	violations                      int
	explainAgreements               int
	upstreamTempLeftovers           int
}

type mpNode struct {
	t        *testing.T
	dir      string
	rtDir    string
	rt       *mpRuntime
	cli      *mpCLI
	noProc   string // a /proc with no kubelet in it
	kubeProc string // a /proc with the upstream process named kubelet
	up       *mpProc
	rng      *rand.Rand
	rotated  bool
	// kubeletPulled holds the image IDs whose pull by the kubelet certainly
	// reached its intent: from then on the kubelet treats the image as one
	// it pulled (the intent, then a record, is on disk).
	kubeletPulled map[string]bool
	upstreamKills int
	upSince       int // the round the running kubelet started in
	curRound      int
	stats         mpStats
}

func mpNewNode(t *testing.T, seed int64) *mpNode {
	t.Helper()
	base := t.TempDir()
	n := &mpNode{
		t:             t,
		dir:           filepath.Join(base, "kubelet"),
		rtDir:         filepath.Join(base, "runtime"),
		noProc:        filepath.Join(base, "proc-empty"),
		kubeProc:      filepath.Join(base, "proc-kubelet"),
		rng:           rand.New(rand.NewSource(seed)),
		kubeletPulled: map[string]bool{},
		stats:         mpStats{roundsByPolicy: map[string]int{}},
	}
	for _, d := range []string{n.dir, n.rtDir, n.noProc, n.kubeProc} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A proc root without a process entry is refused as unusable: the
	// kubelet-free one lists an init process.
	if err := os.MkdirAll(filepath.Join(n.noProc, "1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.noProc, "1", "comm"), []byte("init\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.rt = &mpRuntime{dir: n.rtDir}
	n.cli = &mpCLI{bin: mpPullrecords(t), dir: n.dir}
	for _, img := range mpCatalogue {
		if img.preloaded {
			if _, err := n.rt.add(img.name); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}

func (n *mpNode) pods() []mpPod {
	hashA1 := mpHashA
	if n.rotated {
		hashA1 = mpHashARot
	}
	return []mpPod{
		{name: "a1", tenant: "a", secrets: []mpSecret{{NS: "tenant-a", Name: "regcred", UID: "uid-a1", Hash: hashA1}}},
		// Another secret of tenant A with the same content: a hash match
		// makes the kubelet write during the check.
		{name: "a2", tenant: "a", secrets: []mpSecret{{NS: "tenant-a", Name: "regcred-copy", UID: "uid-a2", Hash: mpHashA}}},
		{name: "b", tenant: "b", secrets: []mpSecret{{NS: "tenant-b", Name: "regcred", UID: "uid-b1", Hash: mpHashB}}},
		{name: "anon", tenant: ""},
	}
}

func (n *mpNode) startUpstream(policy kubeletconfig.ImagePullCredentialsVerificationPolicy) {
	if n.up != nil {
		n.stats.kubeletLifetime = max(n.stats.kubeletLifetime, n.curRound-n.upSince)
	}
	n.up, n.upSince = mpStart(n.t, "upstream", n.dir, n.rtDir, policy), n.curRound
	// The fake /proc shows the running kubelet to pullrecords' check.
	entries, _ := os.ReadDir(n.kubeProc)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(n.kubeProc, e.Name()))
	}
	pidDir := filepath.Join(n.kubeProc, fmt.Sprint(n.up.pid))
	if err := os.MkdirAll(pidDir, 0o700); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pidDir, "comm"), []byte("kubelet\n"), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// violation says what is wrong with the upstream side's answer r to pod
// asking for img, or "" if nothing is: a pod may be told "no pull needed"
// when it could pull the image itself, or, under NeverVerifyPreloadedImages,
// for an image preloaded on the node (out of band) that the kubelet never
// pulled. Everything else on the node got there through a pull with a
// tenant's secret.
func (n *mpNode) violation(img mpImage, pod mpPod, r mpResp) string {
	if !r.Present || r.Must || mpCanPull(pod, img) {
		return ""
	}
	if n.up.policy == kubeletconfig.NeverVerifyPreloadedImages && img.preloaded && !n.kubeletPulled[r.Ref] {
		return ""
	}
	return fmt.Sprintf("upstream (%s) told pod %s (tenant %q) \"no pull needed\" for %s (%s), private to tenant %q and pulled with its secret",
		n.up.policy, pod.name, pod.tenant, img.name, r.Ref, img.owner)
}

// judge checks and counts one answer of the upstream side.
func (n *mpNode) judge(img mpImage, pod mpPod, r mpResp) {
	n.t.Helper()
	if !r.Present {
		return
	}
	n.stats.decisions++
	if r.Must {
		return
	}
	n.stats.noPullNeeded++
	if v := n.violation(img, pod, r); v != "" {
		n.stats.violations++
		n.t.Errorf("VIOLATION: %s", v)
	} else if !mpCanPull(pod, img) {
		n.stats.exempt++
	}
}

func (n *mpNode) checkCmd(img mpImage, pod mpPod) mpCmd {
	return mpCmd{Op: "check", Image: img.name, Pod: pod.secrets}
}

// batchOp is one random operation of the kubelet, with what the judge
// needs to know.
type mpBatchOp struct {
	cmd mpCmd
	img mpImage
	pod mpPod
}

func (n *mpNode) randomOp() mpBatchOp {
	pods := n.pods()
	img := mpCatalogue[n.rng.Intn(len(mpCatalogue))]
	switch x := n.rng.Intn(100); {
	case x < 55:
		if img.neverPull {
			img = mpCatalogue[0]
		}
		// A pod that can pull it; the kubelet uses its secret for a
		// private image, and pulls a public one anonymously.
		var candidates []mpPod
		for _, p := range pods {
			if mpCanPull(p, img) {
				candidates = append(candidates, p)
			}
		}
		pod := candidates[n.rng.Intn(len(candidates))]
		op := "pull"
		if x >= 47 {
			op = "fail"
		}
		c := mpCmd{Op: op, Image: img.name, DelayUS: n.rng.Intn(3000)}
		if img.owner != "" {
			s := pod.secrets[0]
			c.Secret = &s
		}
		return mpBatchOp{cmd: c, img: img, pod: pod}
	case x < 88:
		pod := pods[n.rng.Intn(len(pods))]
		return mpBatchOp{cmd: n.checkCmd(img, pod), img: img, pod: pod}
	case x < 96:
		if img.preloaded { // pinned
			return mpBatchOp{cmd: mpCmd{Op: "prune"}}
		}
		return mpBatchOp{cmd: mpCmd{Op: "gc", Image: img.name}, img: img}
	default:
		return mpBatchOp{cmd: mpCmd{Op: "prune"}}
	}
}

// readOnlyArgs picks a read-only pullrecords command.
func (n *mpNode) readOnlyArgs() []string {
	img := mpCatalogue[n.rng.Intn(len(mpCatalogue))]
	switch n.rng.Intn(4) {
	case 0:
		return []string{"ls", "-o", "json"}
	case 1:
		return []string{"fsck"}
	case 2:
		return []string{"get", mpImageID(img.name), "-o", "json"}
	default:
		pod := n.pods()[n.rng.Intn(4)]
		return n.explainArgs(img, pod)
	}
}

func (n *mpNode) explainArgs(img mpImage, pod mpPod) []string {
	args := []string{"explain", img.name, mpImageID(img.name), "--policy", string(n.up.policy), "-o", "json"}
	for _, s := range pod.secrets {
		args = append(args, "--secret", fmt.Sprintf("%s/%s/%s:%s", s.NS, s.Name, s.UID, s.Hash))
	}
	return args
}

// snapshot is every entry under image_manager: mode, size, time and content.
func (n *mpNode) snapshot() map[string]string {
	n.t.Helper()
	out := map[string]string{}
	root := filepath.Join(n.dir, fsstore.DirName)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e := fmt.Sprintf("%v %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e += " " + mpHash(string(b))
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

func (n *mpNode) sameSnapshot(what string, before map[string]string) {
	n.t.Helper()
	after := n.snapshot()
	for k, v := range before {
		if after[k] != v {
			n.t.Errorf("%s changed image_manager/%s: %q -> %q", what, k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			n.t.Errorf("%s created image_manager/%s (%s)", what, k, v)
		}
	}
}

// The kubelet's own temporary file name (writeFile: the record's name plus
// ".tmp"); the library's are ".sha256-<hex>.<random>.tmp".
var mpKubeletTemp = regexp.MustCompile(`^sha256-[0-9a-f]{64}\.tmp$`)

// checkFiles demands that every file in image_manager decodes under its own
// name and that nothing else is wrong, except temporary files the kubelet
// left when it was killed between writing and renaming (a stock kubelet never
// removes them; it ignores them). It returns how many of those there are.
func (n *mpNode) checkFiles(allowKubeletTemp bool) int {
	n.t.Helper()
	rep, err := fsstore.Inspect(n.dir)
	if err != nil {
		n.t.Fatal(err)
	}
	leftovers := 0
	for _, f := range rep.Files {
		if f.Problem == fsstore.ProblemTempFile && allowKubeletTemp && mpKubeletTemp.MatchString(f.Name) {
			leftovers++
			continue
		}
		n.t.Errorf("fsstore.Inspect: image_manager/%s/%s: %s (%v)", f.Dir, f.Name, f.Problem, f.Err)
	}
	for _, sub := range []string{fsstore.IntentsDir, fsstore.RecordsDir} {
		d := filepath.Join(n.dir, fsstore.DirName, sub)
		entries, err := os.ReadDir(d)
		if err != nil {
			n.t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				n.t.Errorf("%s/%s: %v", sub, e.Name(), err)
				continue
			}
			dec, err := accessor.Decode(b)
			if err != nil {
				n.t.Errorf("%s/%s does not decode: %v", sub, e.Name(), err)
				continue
			}
			wantKind := accessor.KindImagePulledRecord
			if sub == fsstore.IntentsDir {
				wantKind = accessor.KindImagePullIntent
			}
			if dec.Kind != wantKind || fsstore.FileName(dec.Key()) != e.Name() {
				n.t.Errorf("%s/%s holds a %s for %q", sub, e.Name(), dec.Kind, dec.Key())
			}
		}
	}
	return leftovers
}

// verify asks the upstream side about every image on the node for every
// kind of pod.
func (n *mpNode) verify() {
	n.t.Helper()
	for _, img := range mpCatalogue {
		for _, pod := range n.pods() {
			r := n.up.do(n.checkCmd(img, pod), nil)
			n.judge(img, pod, r)
		}
	}
}

func (n *mpNode) wantExit(r mpResult, codes ...int) {
	n.t.Helper()
	n.stats.pullrecordsRuns++
	if r.killed {
		n.stats.pullrecordsKills++
		return
	}
	for _, c := range codes {
		if r.code == c {
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				n.t.Errorf("%s", r)
			}
			return
		}
	}
	n.t.Errorf("want exit %v: %s", codes, r)
}

func (n *mpNode) policyFor(round, rounds int) kubeletconfig.ImagePullCredentialsVerificationPolicy {
	if round >= rounds*2/3 {
		return kubeletconfig.AlwaysVerify
	}
	return kubeletconfig.NeverVerifyPreloadedImages
}

func (n *mpNode) round(i, rounds int) {
	t := n.t
	t.Helper()
	if policy := n.policyFor(i, rounds); n.up == nil || n.up.policy != policy {
		if n.up != nil {
			n.up.stop() // a configuration change: the kubelet restarts
			n.stats.upstreamRestarts++
		}
		n.startUpstream(policy)
	}
	n.stats.rounds++
	n.curRound = i + 1 // this round counts for a kubelet started before it
	n.stats.roundsByPolicy[string(n.up.policy)]++
	if i == rounds/3 {
		n.rotated = true // tenant A rotates its secret's content
	}

	// 1. The kubelet works; read-only commands and an anonymous pre-pull
	// run beside it; the kubelet may be killed at any point.
	ops := make([]mpBatchOp, 8+n.rng.Intn(10))
	for j := range ops {
		ops[j] = n.randomOp()
	}
	type reader struct {
		args      []string
		killAfter time.Duration
	}
	readers := make([]reader, 1+n.rng.Intn(2))
	for j := range readers {
		readers[j] = reader{args: n.readOnlyArgs(), killAfter: -1}
		if n.rng.Intn(4) == 0 {
			readers[j].killAfter = time.Duration(n.rng.Intn(60)) * time.Millisecond
		}
	}
	var prePull string
	if n.rng.Intn(2) == 0 {
		for {
			img := mpCatalogue[n.rng.Intn(len(mpCatalogue))]
			if img.owner == "" {
				prePull = img.name
				break
			}
		}
	}
	prePullAfter := time.Duration(n.rng.Intn(30)) * time.Millisecond
	// The kubelet is killed in one round out of four: after a random
	// time, or at its k-th pull intent, while it "pulls" (between the
	// intent and the record).
	killUpstream := n.rng.Intn(4) == 0
	killAfter := time.Duration(n.rng.Intn(40)) * time.Millisecond
	killAtIntent := 0
	if killUpstream && n.rng.Intn(2) == 0 {
		killAtIntent = 1 + n.rng.Intn(3)
	}

	var wg sync.WaitGroup
	results := make([]mpResult, len(readers))
	for j, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[j] = n.cli.run(n.noProc, r.killAfter, r.args...)
		}()
	}
	var prePullErr error
	if prePull != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(prePullAfter)
			_, prePullErr = n.rt.add(prePull) // an anonymous pre-pull: the runtime only
		}()
	}
	byID := map[int]mpBatchOp{}
	for _, op := range ops {
		byID[n.up.send(op.cmd)] = op
	}
	n.stats.ops += len(ops)
	var killed chan struct{}
	var timer *time.Timer
	proc := n.up
	if killUpstream {
		if killAtIntent > 0 {
			killAfter = 10 * time.Second // unless the batch has fewer intents
		}
		killed = make(chan struct{})
		timer = time.AfterFunc(killAfter, func() {
			_ = proc.cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
		})
	}
	pending := len(ops)
	for pending > 0 {
		r, ok := n.up.next()
		if !ok {
			break
		}
		op, known := byID[r.ID]
		if !known || r.Err != "" {
			t.Fatalf("upstream answered %+v to %+v\n%s", r, op.cmd, n.up.stderr)
		}
		switch r.Stage {
		case "intent":
			if op.cmd.Op == "pull" {
				n.kubeletPulled[mpImageID(op.cmd.Image)] = true
			}
			if killAtIntent--; killAtIntent == 0 && timer.Stop() {
				_ = proc.cmd.Process.Signal(syscall.SIGKILL)
				close(killed)
				n.stats.killsAtIntent++
			}
		case "done":
			pending--
			switch op.cmd.Op {
			case "check":
				n.stats.checks++
				n.judge(op.img, op.pod, r)
			case "pull":
				n.stats.pulls++
			}
		}
	}
	if killUpstream {
		if timer.Stop() {
			_ = proc.cmd.Process.Signal(syscall.SIGKILL) // killed when idle
		} else {
			<-killed
		}
		n.up.drainAndWait()
		n.stats.upstreamKills++
		n.upstreamKills++
		if pending > 0 {
			n.stats.killsMidBatch++
		}
		n.startUpstream(n.up.policy)
		n.stats.upstreamRestarts++
	} else if pending > 0 {
		t.Fatalf("upstream exited with %d commands unanswered\n%s", pending, n.up.stderr)
	}
	wg.Wait()
	if prePullErr != nil {
		t.Fatal(prePullErr)
	}
	if prePull != "" {
		n.stats.anonymousPrePulls++
	}
	for _, r := range results {
		// Beside a working kubelet fsck may see its in-flight temporary
		// files (exit 1); get exits 1 for a record not stored.
		n.wantExit(r, 0, 1)
	}

	// 2. The kubelet is idle: everything pullrecords does must leave
	// image_manager exactly as it was.
	leftovers := n.checkFiles(n.upstreamKills > 0)
	before := n.snapshot()
	writers := [][]string{
		{"fsck", "--repair"},
		{"prune", "--cri", "unix://" + filepath.Join(n.rtDir, "no-such.sock")},
		{"migrate", "--apply"},
	}
	for j, args := range writers {
		if j > 0 && n.rng.Intn(2) == 0 {
			continue
		}
		killAfter := time.Duration(-1)
		if n.rng.Intn(5) == 0 {
			killAfter = time.Duration(n.rng.Intn(60)) * time.Millisecond
		}
		r := n.cli.run(n.kubeProc, killAfter, args...)
		n.wantExit(r, 2)
		if !r.killed {
			n.stats.refusals++
			if !strings.Contains(r.stderr, "running kubelet") || !strings.Contains(r.stderr, fmt.Sprintf("process %d", n.up.pid)) {
				t.Errorf("refusal does not name the running kubelet: %s", r)
			}
		}
	}
	fsckCodes := []int{0}
	if leftovers > 0 {
		fsckCodes = []int{1}
	}
	for j := 0; j < 3; j++ {
		args := n.readOnlyArgs()
		killAfter := time.Duration(-1)
		if n.rng.Intn(5) == 0 {
			killAfter = time.Duration(n.rng.Intn(60)) * time.Millisecond
		}
		r := n.cli.run(n.noProc, killAfter, args...)
		switch args[0] {
		case "fsck":
			n.wantExit(r, fsckCodes...)
		case "get":
			_, err := os.Lstat(filepath.Join(n.dir, fsstore.DirName, fsstore.RecordsDir, fsstore.FileName(args[1])))
			if err == nil {
				n.wantExit(r, 0)
			} else {
				n.wantExit(r, 1)
			}
		default:
			n.wantExit(r, 0)
			if !r.killed && !json.Valid([]byte(r.stdout)) {
				t.Errorf("not JSON: %s", r)
			}
		}
	}
	if prePull == "" {
		for _, img := range mpCatalogue {
			if img.owner == "" && n.rng.Intn(3) == 0 {
				if _, err := n.rt.add(img.name); err != nil {
					t.Fatal(err)
				}
				n.stats.anonymousPrePulls++
				break
			}
		}
	}
	n.sameSnapshot("pullrecords beside the running kubelet", before)

	// 3. What the records on disk say (pullrecords explain) is what the
	// running kubelet answers.
	for j := 0; j < 2; j++ {
		img := mpCatalogue[n.rng.Intn(len(mpCatalogue))]
		if ref, _ := n.rt.ref(img.name); ref == "" {
			continue
		}
		pod := n.pods()[n.rng.Intn(4)]
		r := n.cli.run(n.noProc, -1, n.explainArgs(img, pod)...)
		n.wantExit(r, 0)
		var ex struct {
			MustPull bool `json:"mustPull"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		up := n.up.do(n.checkCmd(img, pod), nil)
		n.judge(img, pod, up)
		if up.Must != ex.MustPull {
			t.Errorf("pullrecords explain says mustPull=%v, the running kubelet %v, for pod %s and %s: %s", ex.MustPull, up.Must, pod.name, img.name, r)
		} else {
			n.stats.explainAgreements++
		}
	}

	// 4. The upstream side's answers for every image and pod.
	n.verify()
	if l := n.checkFiles(n.upstreamKills > 0); l > n.stats.upstreamTempLeftovers {
		n.stats.upstreamTempLeftovers = l
	}
}

// TestMultiProcessBesideLiveKubelet runs upstream's real pull manager in a
// long-lived process and pullrecords beside it, with kill -9 on both sides;
// see the top of this file.
func TestMultiProcessBesideLiveKubelet(t *testing.T) {
	seed := *mpSeedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	rounds := *mpRoundsFlag
	t.Logf("seed %d, %d rounds (rerun with -mp.seed=%d -mp.rounds=%d)", seed, rounds, seed, rounds)
	start := time.Now()
	n := mpNewNode(t, seed)
	for i := 0; i < rounds && !t.Failed(); i++ {
		n.round(i, rounds)
	}

	// Both sides reopen: the kubelet stops, the operator repairs with it
	// stopped (the check finds no kubelet), the kubelet starts again.
	n.up.kill()
	before := n.snapshot()
	r := n.cli.run(n.noProc, -1, "fsck", "--repair")
	n.wantExit(r, 0)
	after := n.snapshot()
	for k, v := range before {
		if strings.HasPrefix(v, "d") {
			continue // directories: removing a file changes their time
		}
		if strings.HasSuffix(k, ".tmp") {
			if _, ok := after[k]; ok {
				t.Errorf("fsck --repair left %s", k)
			}
			continue
		}
		if after[k] != v {
			t.Errorf("fsck --repair changed image_manager/%s: %q -> %q", k, v, after[k])
		}
	}
	n.startUpstream(n.up.policy)
	n.stats.upstreamRestarts++
	n.verify()
	if l := n.checkFiles(false); l != 0 {
		t.Errorf("%d temporary files left", l)
	}
	n.up.stop()

	s := n.stats
	t.Logf("rounds %d (%v), batch ops %d (pulls %d, checks %d), upstream kills %d (%d during a batch, %d of them between a pull's intent and record), upstream restarts %d, longest kubelet run %d rounds",
		s.rounds, s.roundsByPolicy, s.ops, s.pulls, s.checks, s.upstreamKills, s.killsMidBatch, s.killsAtIntent, s.upstreamRestarts, s.kubeletLifetime)
	t.Logf("pullrecords runs %d, pullrecords kills %d, write refusals %d, anonymous pre-pulls %d, explain = kubelet %d, kubelet temp files left by kills (max) %d",
		s.pullrecordsRuns, s.pullrecordsKills, s.refusals, s.anonymousPrePulls, s.explainAgreements, s.upstreamTempLeftovers)
	t.Logf("decisions checked from the upstream side %d (no pull needed %d, of which exempt as preloaded %d), violations %d; %v",
		s.decisions, s.noPullNeeded, s.exempt, s.violations, time.Since(start).Round(time.Millisecond))
	if s.violations != 0 {
		t.Errorf("%d violations", s.violations)
	}
	if s.upstreamKills == 0 && rounds >= 10 {
		t.Errorf("no kill of the kubelet in %d rounds", rounds)
	}
}

// TestMultiProcessCRIDirectPrivatePullLeaks shows the leak that a private
// pull through the CRI, recorded by another process with this library's
// fsstore, causes beside a stock kubelet: the kubelet's authoritative cache
// never sees the record, so the image looks preloaded and a pod without
// credentials is told "no pull needed" under NeverVerifyPreloadedImages,
// until the kubelet restarts. This is why pullrecords refuses to write while
// a kubelet runs, and why the standalone image cache pulls only anonymously.
func TestMultiProcessCRIDirectPrivatePullLeaks(t *testing.T) {
	n := mpNewNode(t, 1)
	n.startUpstream(kubeletconfig.NeverVerifyPreloadedImages)
	pods := n.pods()
	podA, podB, podAnon := pods[0], pods[2], pods[3]

	// The kubelet is warmed up: its cache is authoritative, and it pulls
	// tenant A's app with A's secret.
	app := mpImage{name: "priv.example/a/app:1", owner: "a"}
	secretA := podA.secrets[0]
	n.up.do(mpCmd{Op: "pull", Image: app.name, Secret: &secretA}, nil)
	if r := n.up.do(n.checkCmd(app, podB), nil); !r.Present || !r.Must {
		t.Fatalf("tenant B not told to pull A's app: %+v", r)
	}

	// Another process opens the records with the library, which it can:
	// the kubelet takes no lock.
	lib := mpStart(t, "library", n.dir, n.rtDir, "")
	// While it holds the lock, a third writer is refused, naming it.
	_, err := fsstore.New(ktesting.NewLogger(t, ktesting.NewConfig()), n.dir)
	var le *fsstore.LockedError
	if !errors.As(err, &le) || !errors.Is(err, fsstore.ErrLocked) || le.PID != lib.pid {
		t.Fatalf("a second writable fsstore.New: %v, want *LockedError naming process %d", err, lib.pid)
	}
	// So is pullrecords fsck --repair, even when told the kubelet is
	// stopped, once it has something to repair (a temporary file as a
	// killed kubelet leaves one).
	stray := filepath.Join(n.dir, fsstore.DirName, fsstore.RecordsDir, fsstore.FileName("sha256:stray")+".tmp")
	if err := os.WriteFile(stray, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := n.cli.run(n.noProc, -1, "fsck", "--repair", "--kubelet-stopped")
	n.wantExit(r, 2)
	if !strings.Contains(r.stderr, fmt.Sprintf("locked by process %d", lib.pid)) {
		t.Errorf("fsck --repair does not name the lock holder: %s", r)
	}
	if _, err := os.Lstat(stray); err != nil {
		t.Errorf("the refused repair changed something: %v", err)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	// Without --kubelet-stopped it is the running kubelet that refuses it.
	r = n.cli.run(n.kubeProc, -1, "fsck", "--repair")
	n.wantExit(r, 2)
	if !strings.Contains(r.stderr, "running kubelet") {
		t.Errorf("fsck --repair beside the kubelet: %s", r)
	}

	// It pulls a new private image of tenant A through the CRI and records
	// the pull with A's secret.
	secret := mpImage{name: "priv.example/a/secret:1", owner: "a"}
	lib.do(mpCmd{Op: "pull", Image: secret.name, Secret: &secretA}, nil)
	lib.stop()
	n.checkFiles(false)
	ref := mpImageID(secret.name)
	r = n.cli.run(n.noProc, -1, "get", ref, "-o", "json")
	n.wantExit(r, 0)
	if !strings.Contains(r.stdout, "uid-a1") {
		t.Errorf("the record does not hold A's secret: %s", r)
	}
	// On disk, B must pull.
	r = n.cli.run(n.noProc, -1, n.explainArgs(secret, podB)...)
	n.wantExit(r, 0)
	if !strings.Contains(r.stdout, `"mustPull": true`) {
		t.Errorf("explain from the records on disk does not make B pull: %s", r)
	}

	// The running kubelet never sees the record: the image looks
	// preloaded, and pods without A's credentials are told "no pull
	// needed".
	for _, pod := range []mpPod{podB, podAnon} {
		r := n.up.do(n.checkCmd(secret, pod), nil)
		if !r.Present || r.Must {
			t.Fatalf("the leak did not happen for pod %s: %+v (the running kubelet saw the record)", pod.name, r)
		}
		if n.violation(secret, pod, r) == "" {
			t.Errorf("the judge of TestMultiProcessBesideLiveKubelet does not see this leak")
		}
		t.Logf("LEAK (expected): the running stock kubelet tells pod %s (tenant %q) \"no pull needed\" for %s, pulled by another process with tenant A's secret", pod.name, pod.tenant, secret.name)
	}

	// After a restart the kubelet reads the record: B must pull, A need not.
	n.up.kill()
	n.startUpstream(kubeletconfig.NeverVerifyPreloadedImages)
	for _, c := range []struct {
		pod  mpPod
		must bool
	}{{podB, true}, {podAnon, true}, {podA, false}} {
		r := n.up.do(n.checkCmd(secret, c.pod), nil)
		if !r.Present || r.Must != c.must {
			t.Errorf("after the restart, pod %s: %+v, want must pull %v", c.pod.name, r, c.must)
		}
	}
	n.up.stop()
}
