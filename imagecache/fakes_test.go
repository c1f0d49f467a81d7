package imagecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/pullmanager"
)

func imageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

type pullCall struct {
	Image string
	User  string
}

// fakeImages is an in-memory image service: exact tag lookup, optional
// registry auth per image, scripted failures and blocking pulls.
type fakeImages struct {
	mu       sync.Mutex
	images   map[string]string // reference or ID -> ID
	private  map[string]string // image -> "user:password"
	failures map[string][]error
	blocking map[string]bool
	gates    map[string]chan struct{} // a pull of the image waits until closed
	inflight map[string]int
	maxSame  int // most concurrent pulls of one image seen
	pulls    []pullCall
	removes  []string
	started  chan string
	// digestRefs makes PullImage return a repo digest, as CRI-O does,
	// instead of the image ID that ImageStatus reports.
	digestRefs bool
}

func newFakeImages() *fakeImages {
	return &fakeImages{images: map[string]string{}, private: map[string]string{}, failures: map[string][]error{},
		blocking: map[string]bool{}, gates: map[string]chan struct{}{}, inflight: map[string]int{}, started: make(chan string, 100)}
}

func (f *fakeImages) preload(images ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, img := range images {
		f.images[img] = imageID(img)
		f.images[imageID(img)] = imageID(img)
	}
}

// pulled makes image present after a pull: a name the runtime already
// resolves keeps its image (the content behind the name did not change),
// another name gets an image of its own.
func (f *fakeImages) pulled(image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.images[image]
	if !ok {
		id = imageID(image)
		f.images[image] = id
	}
	f.images[id] = id
}

func (f *fakeImages) has(image string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.images[image]
	return ok
}

func (f *fakeImages) pullCalls() []pullCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pullCall(nil), f.pulls...)
}

func (f *fakeImages) ImageStatus(ctx context.Context, image string) (*pullmanager.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.images[image]
	if !ok {
		return nil, nil
	}
	return &pullmanager.Image{ID: id, RepoTags: []string{image}}, nil
}

func (f *fakeImages) PullImage(ctx context.Context, image string, auth *pullmanager.AuthConfig) (string, error) {
	f.mu.Lock()
	user := ""
	if auth != nil {
		user = auth.Username
	}
	f.pulls = append(f.pulls, pullCall{image, user})
	block := f.blocking[image]
	var err error
	if errs := f.failures[image]; len(errs) > 0 {
		err, f.failures[image] = errs[0], errs[1:]
	}
	want := f.private[image]
	gate := f.gates[image]
	f.inflight[image]++
	f.maxSame = max(f.maxSame, f.inflight[image])
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight[image]--
		f.mu.Unlock()
	}()
	f.started <- image
	if gate != nil {
		<-gate
	}
	if block {
		<-ctx.Done()
		// A bare context error: classified through its Timeout method.
		return "", fmt.Errorf("pulling %s: %w", image, ctx.Err())
	}
	if err != nil {
		return "", err
	}
	if want != "" && (auth == nil || auth.Username+":"+auth.Password != want) {
		return "", &serviceError{msg: "pulling failed: 401 Unauthorized", unauthorized: true}
	}
	f.pulled(image)
	if f.digestRefs {
		return image + "@sha256:0123456789abcdef", nil
	}
	return imageID(image), nil
}

// alias makes name another reference to the image target resolves to.
func (f *fakeImages) alias(name, target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[name] = f.images[target]
}

func (f *fakeImages) RemoveImage(ctx context.Context, image string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removes = append(f.removes, image)
	id, ok := f.images[image]
	if !ok {
		return nil
	}
	for k, v := range f.images {
		if v == id {
			delete(f.images, k)
		}
	}
	return nil
}

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
