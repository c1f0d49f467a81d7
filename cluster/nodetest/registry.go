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

	dir      string
	p        *childproc.Process
	stopOnce sync.Once
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
	host := fmt.Sprintf("127.0.0.1:%d", port)
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
`, filepath.Join(dir, "data"), host, hex.EncodeToString(secret))
	if auth != nil {
		// The registry checks the hash on every request: the minimum cost
		// keeps pushes and pulls fast (a push with DefaultCost took 1.5 s
		// on a loaded 2-core machine, 0.15 s without auth).
		hash, err := bcrypt.GenerateFromPassword([]byte(auth.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(auth.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd: {realm: pullrecords-nodetest, path: %q}\n", htpasswd)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	p, err := childproc.Start("docker-registry", bin, []string{"serve", cfgPath}, nil, filepath.Join(dir, "registry.log"), nil)
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: host, Auth: auth, dir: dir, p: p}
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/v2/", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return r, nil
			}
		}
		switch {
		case p.Exited():
			return nil, fmt.Errorf("docker-registry on %s exited: %v\n%s", host, p.Err(), childproc.LogTail(p.LogPath, 30))
		case ctx.Err() != nil, time.Now().After(deadline):
			r.Stop()
			return nil, fmt.Errorf("docker-registry on %s did not answer /v2/ in time\n%s", host, childproc.LogTail(p.LogPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the registry (idempotent). Its data stays in dir.
func (r *Registry) Stop() {
	r.stopOnce.Do(func() { _ = r.p.Stop(5 * time.Second) })
}
