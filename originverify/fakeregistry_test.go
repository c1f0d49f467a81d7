package originverify

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// authMode is how the fake registry wants clients to authenticate.
type authMode int

const (
	anonymousAccess authMode = iota // anyone may pull every repository
	basicAuth                       // Basic user:password on every manifest request
	bearerAuth                      // a token service on /token, scopes per repository
)

// seenRequest is what the fake registry was asked.
type seenRequest struct {
	Method, Host, Path, Authorization, Accept string
}

// fakeRegistry is a small Distribution-style registry: manifests by tag and
// digest, and Basic or Bearer authentication with access per repository.
type fakeRegistry struct {
	t      testing.TB
	mode   authMode
	server *httptest.Server

	// passwords maps user → password; access maps user → repositories it
	// may pull. The same access map serves refresh and registry tokens.
	passwords map[string]string
	access    map[string][]string
	// refreshTokens maps a refresh (identity) token → user.
	refreshTokens map[string]string
	// registryTokens maps a token accepted as Bearer without the token
	// service → user.
	registryTokens map[string]string

	// manifests maps "repo:tag" and "repo@digest" → manifest body.
	manifests map[string][]byte

	// failWith, when not zero, is the status of every manifest answer.
	failWith int
	// answerDigest, when set, replaces the digest of every manifest answer.
	answerDigest string
	// redirectTo, when set, redirects every manifest request there.
	redirectTo string
	// tokenErrorMessage, when set, replaces the token service's error
	// message for refused credentials ("%s" gets the request's
	// Authorization value, to play a registry that echoes secrets).
	tokenErrorMessage string
	// tokenFailWith, when not zero, is the status of every token answer;
	// refusalStatus, when not zero, replaces 401 for refused credentials
	// (OAuth2 servers answer 400 invalid_grant to a bad refresh token).
	tokenFailWith, refusalStatus int

	mu     sync.Mutex
	seen   []seenRequest
	issued map[string]tokenGrant // access tokens the token service issued
}

type tokenGrant struct {
	user  string
	repos []string
}

func newFakeRegistry(t testing.TB, mode authMode) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{
		t: t, mode: mode,
		passwords: map[string]string{}, access: map[string][]string{},
		refreshTokens: map[string]string{}, registryTokens: map[string]string{},
		manifests: map[string][]byte{}, issued: map[string]tokenGrant{},
	}
	f.server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	return f
}

// host is the fake's 127.0.0.1:PORT.
func (f *fakeRegistry) host() string { return strings.TrimPrefix(f.server.URL, "http://") }

// addUser lets user with password pull repos.
func (f *fakeRegistry) addUser(user, password string, repos ...string) {
	f.passwords[user] = password
	f.access[user] = repos
}

// push stores a manifest under repo:tag and repo@digest and returns the
// digest.
func (f *fakeRegistry) push(repo, tag, content string) string {
	body := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"c":` + strconv.Quote(content) + `}}`)
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	f.manifests[repo+":"+tag] = body
	f.manifests[repo+"@"+digest] = body
	return digest
}

// requests returns what the fake was asked so far.
func (f *fakeRegistry) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{r.Method, r.Host, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept")})
	f.mu.Unlock()
	if r.URL.Path == "/token" {
		if f.tokenFailWith != 0 {
			writeErrors(w, f.tokenFailWith, "UNAVAILABLE", "token service down")
			return
		}
		f.serveToken(w, r)
		return
	}
	path, moved := strings.CutPrefix(r.URL.Path, "/moved")
	rest, ok := strings.CutPrefix(path, "/v2/")
	repo, ref, found := strings.Cut(rest, "/manifests/")
	if !ok || !found {
		writeErrors(w, http.StatusNotFound, "NAME_UNKNOWN", "no such endpoint")
		return
	}
	if r.Method != http.MethodHead && r.Method != http.MethodGet {
		writeErrors(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "read only")
		return
	}
	if !f.allowed(w, r, repo) {
		return
	}
	if f.redirectTo != "" && !moved {
		http.Redirect(w, r, f.redirectTo+r.URL.Path, http.StatusTemporaryRedirect)
		return
	}
	if f.failWith != 0 {
		writeErrors(w, f.failWith, "UNKNOWN", "the fake fails on purpose")
		return
	}
	key := repo + ":" + ref
	if strings.HasPrefix(ref, "sha256:") {
		key = repo + "@" + ref
	}
	body, ok := f.manifests[key]
	if !ok {
		writeErrors(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
		return
	}
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if f.answerDigest != "" {
		digest = f.answerDigest
	}
	w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Docker-Content-Digest", digest)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// allowed checks the request's credential for pulling repo, answering the
// challenge when it fails.
func (f *fakeRegistry) allowed(w http.ResponseWriter, r *http.Request, repo string) bool {
	switch f.mode {
	case basicAuth:
		user, pass, ok := r.BasicAuth()
		if ok && f.passwords[user] == pass && f.mayPull(user, repo) {
			return true
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
		writeErrors(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return false
	case bearerAuth:
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		grant, issued := f.issued[token]
		f.mu.Unlock()
		if issued && contains(grant.repos, repo) {
			return true
		}
		if user, ok := f.registryTokens[token]; ok && f.mayPull(user, repo) {
			return true
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="fake-registry",scope="repository:%s:pull"`, f.server.URL, repo))
		writeErrors(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return false
	default:
		return true
	}
}

func (f *fakeRegistry) mayPull(user, repo string) bool { return contains(f.access[user], repo) }

// serveToken is the token service: GET with Basic credentials (or none,
// for an anonymous token) or POST grant_type=refresh_token. It grants pull
// on the repositories in the asked scopes that the user may pull, as
// Distribution's token servers do (a token without the access is issued,
// and the registry then refuses it).
func (f *fakeRegistry) serveToken(w http.ResponseWriter, r *http.Request) {
	var user string
	var scopes []string
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("service") != "fake-registry" {
			writeErrors(w, http.StatusBadRequest, "UNSUPPORTED", "unknown service")
			return
		}
		scopes = r.URL.Query()["scope"]
		if u, p, ok := r.BasicAuth(); ok {
			if f.passwords[u] != p || p == "" {
				f.refuseToken(w, r, "invalid username or password")
				return
			}
			user = u
		}
	case http.MethodPost:
		if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("service") != "fake-registry" {
			writeErrors(w, http.StatusBadRequest, "UNSUPPORTED", "unsupported grant")
			return
		}
		u, ok := f.refreshTokens[r.PostForm.Get("refresh_token")]
		if !ok {
			f.refuseToken(w, r, "invalid refresh token")
			return
		}
		user = u
		scopes = strings.Fields(r.PostForm.Get("scope"))
	default:
		writeErrors(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "GET or POST")
		return
	}
	var granted []string
	for _, scope := range scopes {
		parts := strings.Split(scope, ":")
		if len(parts) == 3 && parts[0] == "repository" && strings.Contains(parts[2], "pull") && user != "" && f.mayPull(user, parts[1]) {
			granted = append(granted, parts[1])
		}
	}
	f.mu.Lock()
	token := fmt.Sprintf("issued-%d-%s", len(f.issued), user)
	f.issued[token] = tokenGrant{user: user, repos: granted}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": token, "access_token": token})
}

func (f *fakeRegistry) refuseToken(w http.ResponseWriter, r *http.Request, message string) {
	if f.tokenErrorMessage != "" {
		message = f.tokenErrorMessage
		if strings.Contains(message, "%s") {
			body := r.Header.Get("Authorization") + " " + r.PostForm.Get("refresh_token")
			if _, basic, ok := strings.Cut(r.Header.Get("Authorization"), "Basic "); ok {
				if raw, err := base64.StdEncoding.DecodeString(basic); err == nil {
					body += " " + string(raw)
				}
			}
			message = fmt.Sprintf(message, body)
		}
	}
	status := http.StatusUnauthorized
	if f.refusalStatus != 0 {
		status = f.refusalStatus
	}
	writeErrors(w, status, "UNAUTHORIZED", message)
}

func writeErrors(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
