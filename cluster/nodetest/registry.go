package nodetest

import (
	"github.com/pullrecords/pullrecords/cluster/internal/childproc"

	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// BasicAuth is a registry user name and password.
type BasicAuth struct {
	Username string
	Password string
}

// Registry is a Distribution registry ("docker-registry serve", Debian's
// docker-registry package) serving plain HTTP on 127.0.0.1.
type Registry struct {
	// Host is 127.0.0.1:PORT, the registry part of its image references.
	Host string
	// Auth is the user the registry requires, nil for an open registry.
	Auth *BasicAuth

	dir string
	bin string

	mu sync.Mutex
	p  *childproc.Process // nil once stopped
}

// URL returns the registry's base URL (http://Host).
func (r *Registry) URL() string { return "http://" + r.Host }

// StartRegistry starts docker-registry on a free 127.0.0.1 port with its
// storage, configuration and log under dir (created if missing), requiring
// auth through an htpasswd file when auth is not nil, and waits until it
// answers /v2/. Every request the registry serves is in its access log,
// read back by Requests. Stop it with Stop.
func StartRegistry(ctx context.Context, dir string, auth *BasicAuth) (*Registry, error) {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return nil, fmt.Errorf("docker-registry not found (install Debian's docker-registry package): %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", port), Auth: auth, dir: dir, bin: bin}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// start writes the registry's configuration (and htpasswd file, when Auth
// is not nil) for r.Host, starts docker-registry, its output appended to
// LogPath, and waits until it answers /v2/.
func (r *Registry) start(ctx context.Context) error {
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	// The registry's own messages are JSON (formatter json), so that no
	// line of theirs can be taken for an access-log line (Requests).
	cfg := fmt.Sprintf(`version: 0.1
log: {level: warn, formatter: json, accesslog: {disabled: false}}
storage:
  filesystem: {rootdirectory: %q}
  delete: {enabled: true}
http:
  addr: %s
  secret: %s
`, filepath.Join(r.dir, "data"), r.Host, hex.EncodeToString(secret))
	if r.Auth != nil {
		// The registry checks the hash on every request: the minimum cost
		// keeps pushes and pulls fast (a push with DefaultCost took 1.5 s
		// on a loaded 2-core machine, 0.15 s without auth).
		hash, err := bcrypt.GenerateFromPassword([]byte(r.Auth.Password), bcrypt.MinCost)
		if err != nil {
			return err
		}
		htpasswd := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(r.Auth.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return err
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd: {realm: pullrecords-nodetest, path: %q}\n", htpasswd)
	}
	cfgPath := filepath.Join(r.dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := childproc.Start("docker-registry", r.bin, []string{"serve", cfgPath}, nil, r.LogPath(), nil)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/v2/", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		switch {
		case p.Exited():
			r.Stop()
			return fmt.Errorf("docker-registry on %s exited: %v\n%s", r.Host, p.Err(), childproc.LogTail(p.LogPath, 30))
		case ctx.Err() != nil, time.Now().After(deadline):
			r.Stop()
			return fmt.Errorf("docker-registry on %s did not answer /v2/ in time\n%s", r.Host, childproc.LogTail(p.LogPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ChangePassword makes the registry require password for its user from
// now on, as a registry that revoked a credential does: it stops the
// registry, writes its htpasswd file with Auth's user name and password,
// and starts it again on the same Host, with the same data (images pushed
// before are still there) and the same log (so Requests keeps the requests
// served before). It returns once the registry answers /v2/ again; from
// then on the old password is refused with 401. Auth is then a new
// BasicAuth with the new password (the one given to StartRegistry is not
// modified). Requests made while it restarts fail (connection refused).
// It is an error on an open registry (Auth nil) and on a stopped one.
// Not safe for use concurrently with itself or Stop.
func (r *Registry) ChangePassword(ctx context.Context, password string) error {
	if r.Auth == nil {
		return fmt.Errorf("nodetest: registry %s is open (no htpasswd): no password to change", r.Host)
	}
	r.mu.Lock()
	running := r.p != nil
	r.mu.Unlock()
	if !running {
		return fmt.Errorf("nodetest: registry %s is stopped", r.Host)
	}
	r.Stop()
	r.Auth = &BasicAuth{Username: r.Auth.Username, Password: password}
	return r.start(ctx)
}

// Stop stops the registry (idempotent). Its data stays in dir.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		_ = r.p.Stop(5 * time.Second)
		r.p = nil
	}
}
