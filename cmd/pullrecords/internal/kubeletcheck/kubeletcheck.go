package kubeletcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

const (
	// DefaultProcRoot is where the process list is read.
	DefaultProcRoot = "/proc"
	// DefaultHealthzURL is the kubelet's default healthz endpoint
	// (--healthz-bind-address 127.0.0.1, --healthz-port 10248).
	DefaultHealthzURL = "http://127.0.0.1:10248/healthz"
	// defaultTimeout bounds the healthz probe.
	defaultTimeout = 500 * time.Millisecond
	// processName is the comm of a kubelet process.
	processName = "kubelet"
)

var (
	// ErrUnusableProcRoot is wrapped by a *ProcRootError: the process list
	// cannot be scanned, so a running kubelet could not be seen.
	ErrUnusableProcRoot = errors.New("unusable proc root")
	// ErrBadHealthzURL is wrapped by the error for a healthz URL that is not
	// an absolute http or https URL.
	ErrBadHealthzURL = errors.New("not an http or https URL")
)

// ProcRootError says why a proc root cannot be scanned: Path as given (""
// for an empty one) and Reason, in a few words.
type ProcRootError struct {
	Path   string
	Reason string
	Err    error // the underlying error, if any
}

func (e *ProcRootError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

func (e *ProcRootError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrUnusableProcRoot}
	}
	return []error{ErrUnusableProcRoot, e.Err}
}

// Checker looks for a running kubelet. The process scan always runs: an
// empty ProcRoot is an error, like any other unusable one. The defaults are
// DefaultProcRoot and DefaultHealthzURL.
type Checker struct {
	// ProcRoot is the /proc to scan.
	ProcRoot string
	// HealthzURL is probed with a GET; "" skips the probe (not the scan).
	HealthzURL string
	// Timeout bounds the probe; zero means defaultTimeout.
	Timeout time.Duration
	// Client sends the probe; nil means a client without proxies.
	Client *http.Client
}

// Result is what Detect found.
type Result struct {
	// Running is true when any signal found a kubelet.
	Running bool
	// PIDs are the kubelet processes found, ascending.
	PIDs []int
	// Healthz is the endpoint that answered, with its status code; "" if
	// none did.
	Healthz string
}

// Evidence describes what was found in a few words, for a message:
// `process 1234 ("kubelet")`, `http://127.0.0.1:10248/healthz answered 200`,
// or both joined by " and ". It is "" when nothing was found.
func (r Result) Evidence() string {
	var s string
	switch len(r.PIDs) {
	case 0:
	case 1:
		s = fmt.Sprintf("process %d (%q)", r.PIDs[0], processName)
	default:
		s = fmt.Sprintf("processes %v (%q)", r.PIDs, processName)
	}
	if r.Healthz != "" {
		if s != "" {
			s += " and "
		}
		s += r.Healthz
	}
	return s
}

// checkHealthzURL returns an error wrapping ErrBadHealthzURL unless u is ""
// (no probe) or an absolute http or https URL with a host.
func checkHealthzURL(u string) error {
	if u == "" {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q: %w", u, ErrBadHealthzURL)
	}
	return nil
}

// Detect runs both checks. It fails, having probed nothing, when the proc
// root cannot be scanned (a *ProcRootError) or the healthz URL is not one
// (ErrBadHealthzURL): either would make a running kubelet invisible.
func (c *Checker) Detect(ctx context.Context) (Result, error) {
	var r Result
	if err := checkHealthzURL(c.HealthzURL); err != nil {
		return r, err
	}
	pids, err := processes(c.ProcRoot)
	if err != nil {
		return r, err
	}
	r.PIDs = pids
	if c.HealthzURL != "" {
		if code, ok := c.probe(ctx); ok {
			r.Healthz = fmt.Sprintf("%s answered %d", c.HealthzURL, code)
		}
	}
	r.Running = len(r.PIDs) > 0 || r.Healthz != ""
	return r, nil
}

// processes returns the PIDs under procRoot whose comm is processName,
// ascending. Entries that vanish or cannot be read are skipped, but a proc
// root that cannot be scanned is a *ProcRootError: an empty path, one that
// is missing, not a directory or cannot be listed, one that lists no
// process (numeric) entry at all (a real /proc lists at least the reader's
// own process, or in a container given the host's /proc, the host's), and
// one whose process entries all have an unreadable comm.
func processes(procRoot string) ([]int, error) {
	if procRoot == "" {
		return nil, &ProcRootError{Reason: "empty path"}
	}
	fi, err := os.Stat(procRoot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &ProcRootError{Path: procRoot, Reason: "no such directory", Err: err}
	case err != nil:
		return nil, &ProcRootError{Path: procRoot, Reason: "cannot be read: " + reason(err), Err: err}
	case !fi.IsDir():
		return nil, &ProcRootError{Path: procRoot, Reason: "not a directory"}
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, &ProcRootError{Path: procRoot, Reason: "cannot be listed: " + reason(err), Err: err}
	}
	var pids []int
	processes, readable := 0, 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		processes++
		comm, err := readSmall(filepath.Join(procRoot, e.Name(), "comm"))
		if err != nil {
			continue
		}
		readable++
		if string(bytes.TrimSuffix(comm, []byte("\n"))) == processName {
			pids = append(pids, pid)
		}
	}
	switch {
	case processes == 0:
		return nil, &ProcRootError{Path: procRoot, Reason: "holds no process entries: not a proc filesystem"}
	case readable == 0:
		return nil, &ProcRootError{Path: procRoot, Reason: fmt.Sprintf("no comm of its %d process entries can be read", processes)}
	}
	sort.Ints(pids)
	return pids, nil
}

// reason is err without the path a *fs.PathError repeats.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readSmall reads at most 64 bytes: comm is at most 16.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64))
}

// probe reports whether the healthz endpoint answered HTTP, and its status.
func (c *Checker) probe(ctx context.Context) (int, bool) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.HealthzURL, nil)
	if err != nil {
		return 0, false
	}
	client := c.Client
	if client == nil {
		// No proxy: the endpoint is on this node.
		client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, true
}
