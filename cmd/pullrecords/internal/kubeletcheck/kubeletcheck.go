package kubeletcheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
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

// Checker looks for a running kubelet. The zero value checks nothing.
type Checker struct {
	// ProcRoot is the /proc to scan; "" skips the process scan.
	ProcRoot string
	// HealthzURL is probed with a GET; "" skips the probe.
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

// Detect runs both checks.
func (c *Checker) Detect(ctx context.Context) Result {
	var r Result
	if c.ProcRoot != "" {
		r.PIDs = processes(c.ProcRoot)
	}
	if c.HealthzURL != "" {
		if code, ok := c.probe(ctx); ok {
			r.Healthz = fmt.Sprintf("%s answered %d", c.HealthzURL, code)
		}
	}
	r.Running = len(r.PIDs) > 0 || r.Healthz != ""
	return r
}

// processes returns the PIDs under procRoot whose comm is processName,
// ascending. Entries that vanish or cannot be read are skipped.
func processes(procRoot string) []int {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := readSmall(filepath.Join(procRoot, e.Name(), "comm"))
		if err != nil {
			continue
		}
		if string(bytes.TrimSuffix(comm, []byte("\n"))) == processName {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
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
