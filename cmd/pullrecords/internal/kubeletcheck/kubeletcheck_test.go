package kubeletcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fakeProc builds a /proc with the given pid -> comm entries.
func fakeProc(t *testing.T, comms map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, comm := range comms {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if comm == "" {
			continue // a process whose comm cannot be read
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestProcesses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		comms map[string]string
		want  []int
	}{
		{"none", map[string]string{"1": "systemd\n", "42": "containerd\n"}, nil},
		{"one", map[string]string{"1": "systemd\n", "812": "kubelet\n"}, []int{812}},
		{"several, sorted", map[string]string{"900": "kubelet\n", "77": "kubelet\n"}, []int{77, 900}},
		{"no trailing newline", map[string]string{"5": "kubelet"}, []int{5}},
		{"prefix is not enough", map[string]string{"5": "kubelet-wrapper\n", "6": "kube\n"}, nil},
		{"non-pid entries and unreadable comm", map[string]string{"self": "kubelet\n", "net": "kubelet\n", "8": ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := processes(fakeProc(t, tc.comms))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Processes = %v, want %v", got, tc.want)
			}
		})
	}
	if got := processes(filepath.Join(t.TempDir(), "missing")); got != nil {
		t.Errorf("missing /proc: %v, want nothing", got)
	}
}

func TestDetect(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer healthy.Close()
	unhealthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ok", http.StatusInternalServerError)
	}))
	defer unhealthy.Close()
	// A port nobody listens on: take one and close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/healthz"
	l.Close()

	withKubelet := fakeProc(t, map[string]string{"1": "systemd\n", "4242": "kubelet\n"})
	without := fakeProc(t, map[string]string{"1": "systemd\n"})

	for _, tc := range []struct {
		name         string
		c            Checker
		wantRunning  bool
		wantEvidence string
	}{
		{"nothing checked", Checker{}, false, ""},
		{"process only", Checker{ProcRoot: withKubelet, HealthzURL: closed}, true, `process 4242 ("kubelet")`},
		{"nothing found", Checker{ProcRoot: without, HealthzURL: closed}, false, ""},
		{"healthz only", Checker{ProcRoot: without, HealthzURL: healthy.URL + "/healthz"}, true, healthy.URL + "/healthz answered 200"},
		{"unhealthy still runs", Checker{HealthzURL: unhealthy.URL}, true, unhealthy.URL + " answered 500"},
		{"both", Checker{ProcRoot: withKubelet, HealthzURL: healthy.URL}, true, `process 4242 ("kubelet") and ` + healthy.URL + " answered 200"},
		{"bad URL is not detected", Checker{HealthzURL: "::nonsense"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.Detect(context.Background())
			if r.Running != tc.wantRunning || r.Evidence() != tc.wantEvidence {
				t.Errorf("Detect = running %t, evidence %q; want %t, %q", r.Running, r.Evidence(), tc.wantRunning, tc.wantEvidence)
			}
		})
	}
}

// A healthz endpoint that never answers costs at most the timeout.
func TestDetectTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	c := Checker{HealthzURL: srv.URL, Timeout: 50 * time.Millisecond}
	// The handler answers only when the test ends: were the timeout ignored,
	// Detect would never return.
	r := c.Detect(context.Background())
	if r.Running {
		t.Error("an endpoint that never answered counts as a kubelet")
	}
}

func TestEvidenceSeveral(t *testing.T) {
	r := Result{Running: true, PIDs: []int{3, 9}}
	if got, want := r.Evidence(), `processes [3 9] ("kubelet")`; got != want {
		t.Errorf("Evidence = %q, want %q", got, want)
	}
}
