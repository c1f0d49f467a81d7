package kubeletcheck

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
		{"non-pid entries and an unreadable comm", map[string]string{"self": "kubelet\n", "net": "kubelet\n", "8": "", "9": "init\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := processes(fakeProc(t, tc.comms))
			if err != nil {
				t.Fatalf("Processes: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Processes (-want +got):\n%s", diff)
			}
		})
	}
}

// A proc root that cannot be scanned is an error naming it and why, never
// "no kubelet".
func TestProcessesUnusable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		root string
		want string
	}{
		{"empty path", "", "empty path"},
		{"missing", filepath.Join(dir, "missing"), filepath.Join(dir, "missing") + ": no such directory"},
		{"not a directory", file, file + ": not a directory"},
		{"empty directory", t.TempDir(), ": holds no process entries: not a proc filesystem"},
		{"no numeric entry", fakeProc(t, map[string]string{"self": "kubelet\n", "sys": "x"}), ": holds no process entries: not a proc filesystem"},
		{"no readable comm", fakeProc(t, map[string]string{"1": "", "2": ""}), ": no comm of its 2 process entries can be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pids, err := processes(tc.root)
			var pe *ProcRootError
			if !errors.Is(err, ErrUnusableProcRoot) || !errors.As(err, &pe) || pe.Path != tc.root {
				t.Fatalf("processes(%q) = %v, %v; want a *ProcRootError for the path", tc.root, pids, err)
			}
			if got := err.Error(); got != tc.want && got != tc.root+tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
			if pids != nil {
				t.Errorf("PIDs %v beside an error", pids)
			}
		})
	}
}

// A directory that cannot be listed is unusable (not checked as root,
// who can list it anyway).
func TestProcessesUnlistable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root lists a mode 0 directory: nothing to test")
	}
	root := fakeProc(t, map[string]string{"1": "kubelet\n"})
	if err := os.Chmod(root, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(root, 0o755)
	_, err := processes(root)
	if !errors.Is(err, ErrUnusableProcRoot) || err.Error() != root+": cannot be listed: permission denied" {
		t.Errorf("Processes = %v", err)
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
		{"process only", Checker{ProcRoot: withKubelet, HealthzURL: closed}, true, `process 4242 ("kubelet")`},
		{"process, probe skipped", Checker{ProcRoot: withKubelet}, true, `process 4242 ("kubelet")`},
		{"nothing found", Checker{ProcRoot: without, HealthzURL: closed}, false, ""},
		{"healthz only", Checker{ProcRoot: without, HealthzURL: healthy.URL + "/healthz"}, true, healthy.URL + "/healthz answered 200"},
		{"unhealthy still runs", Checker{ProcRoot: without, HealthzURL: unhealthy.URL}, true, unhealthy.URL + " answered 500"},
		{"both", Checker{ProcRoot: withKubelet, HealthzURL: healthy.URL}, true, `process 4242 ("kubelet") and ` + healthy.URL + " answered 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.c.Detect(context.Background())
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if r.Running != tc.wantRunning || r.Evidence() != tc.wantEvidence {
				t.Errorf("Detect = running %t, evidence %q; want %t, %q", r.Running, r.Evidence(), tc.wantRunning, tc.wantEvidence)
			}
		})
	}
}

// Configuration that would make a running kubelet invisible is an error,
// even where the other signal would have found it.
func TestDetectRefusesBlindConfiguration(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer healthy.Close()
	withKubelet := fakeProc(t, map[string]string{"4242": "kubelet\n"})
	for _, tc := range []struct {
		name string
		c    Checker
		want error
	}{
		{"zero value", Checker{}, ErrUnusableProcRoot},
		{"empty proc root", Checker{HealthzURL: healthy.URL}, ErrUnusableProcRoot},
		{"missing proc root", Checker{ProcRoot: filepath.Join(t.TempDir(), "x"), HealthzURL: healthy.URL}, ErrUnusableProcRoot},
		{"bad URL", Checker{ProcRoot: withKubelet, HealthzURL: "::nonsense"}, ErrBadHealthzURL},
		{"not http", Checker{ProcRoot: withKubelet, HealthzURL: "ftp://127.0.0.1/healthz"}, ErrBadHealthzURL},
		{"no host", Checker{ProcRoot: withKubelet, HealthzURL: "http:///healthz"}, ErrBadHealthzURL},
		{"relative", Checker{ProcRoot: withKubelet, HealthzURL: "healthz"}, ErrBadHealthzURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.c.Detect(context.Background())
			if !errors.Is(err, tc.want) {
				t.Errorf("Detect = %+v, %v; want %v", r, err, tc.want)
			}
		})
	}
}

func TestCheckHealthzURL(t *testing.T) {
	for _, ok := range []string{"", DefaultHealthzURL, "https://[::1]:10248/healthz"} {
		if err := checkHealthzURL(ok); err != nil {
			t.Errorf("checkHealthzURL(%q) = %v", ok, err)
		}
	}
	if err := checkHealthzURL("10248"); err == nil || err.Error() != `"10248": not an http or https URL` {
		t.Errorf("checkHealthzURL(10248) = %v", err)
	}
}

// A healthz endpoint that never answers costs at most the timeout.
func TestDetectTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	c := Checker{ProcRoot: fakeProc(t, map[string]string{"1": "init\n"}), HealthzURL: srv.URL, Timeout: 50 * time.Millisecond}
	// The handler answers only when the test ends: were the timeout ignored,
	// Detect would never return.
	r, err := c.Detect(context.Background())
	if err != nil || r.Running {
		t.Errorf("an endpoint that never answered: running %t, %v", r.Running, err)
	}
}

// The real /proc is usable: it lists at least this process.
func TestRealProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/comm"); err != nil {
		t.Skip("no /proc on this system")
	}
	if _, err := processes(DefaultProcRoot); err != nil {
		t.Errorf("processes(/proc) = %v", err)
	}
}

func TestEvidenceSeveral(t *testing.T) {
	r := Result{Running: true, PIDs: []int{3, 9}}
	if got, want := r.Evidence(), `processes [3 9] ("kubelet")`; got != want {
		t.Errorf("Evidence = %q, want %q", got, want)
	}
}
