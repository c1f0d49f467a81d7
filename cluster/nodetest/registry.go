package nodetest

import (
	"github.com/pullrecords/pullrecords/cluster/internal/childproc"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// RegistryOptions configures StartRegistryWithOptions.
type RegistryOptions struct {
	// Auth is the user the registry requires (htpasswd); nil: open.
	Auth *BasicAuth
	// Proxy, if set, makes the registry a pull-through cache of another
	// registry; nil: a registry of its own, which takes pushes.
	Proxy *RegistryProxy
}

// RegistryProxy makes a registry a pull-through cache (docker-registry's
// "proxy:" section): a manifest or blob it does not hold is fetched from
// RemoteURL and served; a manifest asked for by tag is looked up at the
// remote again on each request. Such a registry refuses pushes. Do not
// count on it to keep a blob: docker-registry 2.8.2 was seen here to fetch
// a small blob from the remote again on every read and not to serve it
// with the remote stopped.
//
// Username and Password are sent to the remote only when it answers with a
// token challenge whose realm is a URL (Docker Hub's flow):
// docker-registry 2.8.2 looks its credentials up by the challenge's realm,
// so against an htpasswd (basic auth) remote they are never sent and every
// request the cache makes there is answered 401 (seen on this machine).
// Use an open remote, or an open registry holding a copy, for a mirror of
// an htpasswd registry.
type RegistryProxy struct {
	RemoteURL          string
	Username, Password string
}

// StartRegistry starts docker-registry on a free 127.0.0.1 port with its
// storage, configuration and log under dir (created if missing), requiring
// auth through an htpasswd file when auth is not nil, and waits until it
// answers /v2/. Stop it with Stop. It is StartRegistryWithOptions with
// RegistryOptions{Auth: auth}.
func StartRegistry(ctx context.Context, dir string, auth *BasicAuth) (*Registry, error) {
	return StartRegistryWithOptions(ctx, dir, RegistryOptions{Auth: auth})
}

// StartRegistryWithOptions starts docker-registry as StartRegistry does,
// with opts: basic auth, and/or a pull-through cache of a remote registry
// (which must answer when the cache starts: docker-registry asks it for
// /v2/ at start-up and exits if it cannot). Every request the registry
// serves is in its access log, read back by Requests.
func StartRegistryWithOptions(ctx context.Context, dir string, opts RegistryOptions) (*Registry, error) {
	auth := opts.Auth
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
	if p := opts.Proxy; p != nil {
		if p.RemoteURL == "" {
			return nil, errors.New("nodetest: RegistryProxy needs RemoteURL")
		}
		cfg += fmt.Sprintf("proxy:\n  remoteurl: %q\n", p.RemoteURL)
		if p.Username != "" || p.Password != "" {
			cfg += fmt.Sprintf("  username: %q\n  password: %q\n", p.Username, p.Password)
		}
	}
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
