package imagecache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// imageID is the ID the fake runtime gives image when it is pulled or
// added (critest.ImageID).
func imageID(image string) string {
	id, err := critest.ImageID(image)
	if err != nil {
		panic(err)
	}
	return id
}

type pullCall struct {
	Image string
	User  string
}

// fakeRuntime is the container runtime of the tests: critest's fake CRI
// image service, a real gRPC server on a unix socket, and client, the real
// cri client dialled to it, which is the image service the managers are
// given. Required credentials are critest's RequireAuth; scripted failures,
// blocking and gated pulls are PullImage hooks (critest's Intercept).
type fakeRuntime struct {
	*critest.ImageService
	client *cri.ImageService

	mu       sync.Mutex
	creds    map[string]string  // repository -> the "user:password" a pull needs now
	failures map[string][]error // image -> the answers of its next pulls
	blocking map[string]bool
	gates    map[string]chan struct{} // a pull of the image waits until closed
	// started receives the image of every pull as it reaches the runtime.
	started chan string
}

func newFakeRuntime(t *testing.T) *fakeRuntime {
	t.Helper()
	f := &fakeRuntime{ImageService: critest.NewImageService(), creds: map[string]string{}, failures: map[string][]error{},
		blocking: map[string]bool{}, gates: map[string]chan struct{}{}, started: make(chan string, 100)}
	f.Intercept(critest.PullImage, f.pullHook)
	client, err := cri.Dial(context.Background(), f.Serve(t))
	if err != nil {
		t.Fatalf("cri.Dial: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	f.client = client
	return f
}

// pullHook runs at the start of every PullImage the runtime receives.
func (f *fakeRuntime) pullHook(ctx context.Context, c critest.Call) error {
	f.mu.Lock()
	block := f.blocking[c.Image]
	var err error
	if errs := f.failures[c.Image]; len(errs) > 0 {
		err, f.failures[c.Image] = errs[0], errs[1:]
	}
	gate := f.gates[c.Image]
	f.mu.Unlock()
	f.started <- c.Image
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	if block {
		return critest.Block(ctx, c)
	}
	return err
}

// preload makes images present, as if pulled before the manager started.
func (f *fakeRuntime) preload(images ...string) {
	for _, img := range images {
		if _, err := f.AddImage(img); err != nil {
			panic(err)
		}
	}
}

// requireAuth makes a pull of image's repository need userPass
// ("user:password"), from now on instead of what it needed before.
func (f *fakeRuntime) requireAuth(image, userPass string) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		panic(err)
	}
	repo := named.Name()
	user, pass, _ := strings.Cut(userPass, ":")
	f.mu.Lock()
	f.creds[repo] = userPass
	f.mu.Unlock()
	f.RequireAuth(func(r string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return r == repo && f.creds[repo] == userPass
	}, user, pass)
}

// fail makes the next pulls of image answer errs, one each; give them a
// gRPC status to choose the code the client sees.
func (f *fakeRuntime) fail(image string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[image] = errs
}

// block makes the pulls of image that start from now on hang until their
// context ends (on) or not.
func (f *fakeRuntime) block(image string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocking[image] = on
}

// gate makes the pulls of image wait until gate is closed.
func (f *fakeRuntime) gate(image string, gate chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gates[image] = gate
}

func (f *fakeRuntime) has(image string) bool { return f.Image(image) != nil }

// pullCalls returns the pulls the runtime received: the image as the
// client sent it, and the username, if any.
func (f *fakeRuntime) pullCalls() []pullCall {
	var out []pullCall
	for _, c := range f.Calls() {
		if c.Method == critest.PullImage {
			out = append(out, pullCall{c.Image, c.Auth.GetUsername()})
		}
	}
	return out
}

// selfClassified is an image service whose own client classifies its pull
// errors, as a runtime shim's may: each comes back as a copy of as carrying
// the runtime's message. It carries the one classification a gRPC code
// cannot (cri calls every DeadlineExceeded transient): a timeout the service
// calls permanent.
type selfClassified struct {
	ImageService
	as serviceError
}

func (s selfClassified) PullImage(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	ref, err := s.ImageService.PullImage(ctx, image, auth)
	if err != nil {
		e := s.as
		e.msg = err.Error()
		return "", &e
	}
	return ref, nil
}

// errRuntimeBusy is the fake runtime's answer for "try again later".
var errRuntimeBusy = status.Error(codes.Unavailable, "runtime busy")

// serviceError is an image service error that classifies itself the way
// the manager reads it (see IsTransient).
type serviceError struct {
	msg                              string
	unauthorized, timeout, transient bool
}

func (e *serviceError) Error() string      { return e.msg }
func (e *serviceError) Unauthorized() bool { return e.unauthorized }
func (e *serviceError) Timeout() bool      { return e.timeout }
func (e *serviceError) Transient() bool    { return e.transient }

var errUnavailable = &serviceError{msg: "runtime busy", transient: true}

// sink collects what the handlers receive.
type sink struct {
	mu       sync.Mutex
	results  []ImageWorkResult
	statuses []CacheStatus
	events   []string // "result <image>" and "status <batch>", in order
	statusCh chan CacheStatus
}

func newSink() *sink { return &sink{statusCh: make(chan CacheStatus, 100)} }

func (s *sink) options() []Option {
	return []Option{
		WithResultHandler(func(r ImageWorkResult) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.results = append(s.results, r)
			s.events = append(s.events, fmt.Sprintf("result %s %s", r.Request.ImageCache, r.Request.Image))
		}),
		WithStatusHandler(func(st CacheStatus) {
			s.mu.Lock()
			s.statuses = append(s.statuses, st)
			s.events = append(s.events, fmt.Sprintf("status %s %d", st.ImageCache, st.Batch))
			s.mu.Unlock()
			s.statusCh <- st
		}),
	}
}

// wait returns the next completed batch status.
func (s *sink) wait(t *testing.T) CacheStatus {
	t.Helper()
	select {
	case st := <-s.statusCh:
		return st
	case <-time.After(60 * time.Second):
		t.Fatal("no batch completed (test hung)")
		return CacheStatus{}
	}
}

func (s *sink) all() []ImageWorkResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ImageWorkResult(nil), s.results...)
}

// run starts m.Run and returns a stop function that waits for it.
func run(t *testing.T, m *Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
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
	return stop
}
