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
	Method, Host, Path, Authorization, Accept, Range string
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

	// manifests maps "repo:tag" and "repo@digest" → manifest body;
	// mediaTypes maps the same keys → Content-Type (OCI manifest when
	// missing).
	manifests  map[string][]byte
	mediaTypes map[string]string
	// blobs maps digest → the bytes served for it (any repository).
	blobs map[string][]byte

	// The lies of a registry that vouches for content it does not hold
	// (see lying_test.go).
	//
	// noManifestBody answers a manifest GET with 200 and its headers but
	// no body; noDigestHeader leaves Docker-Content-Digest out.
	noManifestBody, noDigestHeader bool
	// headOnly answers a manifest HEAD (200 and the digest) and a GET with
	// 404, as a registry that only vouches.
	headOnly bool
	// ignoreRanges answers a ranged blob GET with 200 and the whole blob.
	ignoreRanges bool
	// shiftRanges answers a range for another offset (this many bytes
	// later, or earlier near the end), with a Content-Range naming what it
	// sent.
	shiftRanges int64
	// truncateBlobs announces a Content-Length 100 bytes longer than the
	// blob body it sends.
	truncateBlobs bool
	// slowBlobs sends a blob answer's headers and then nothing until the
	// client gives up.
	slowBlobs bool
	// blobStatus, when not zero, is the status of every blob answer.
	blobStatus int
	// blobRedirect, when set, redirects every blob request there (+path).
	blobRedirect string

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
		manifests: map[string][]byte{}, mediaTypes: map[string]string{}, blobs: map[string][]byte{},
		issued: map[string]tokenGrant{},
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

// push stores a small image (a config and one layer made of content)
// under repo:tag and repo@digest and returns the manifest digest.
func (f *fakeRegistry) push(repo, tag, content string) string {
	return f.pushImage(repo, tag, image{config: []byte(`{"c":` + strconv.Quote(content) + `}`), layers: [][]byte{[]byte("layer of " + content)}})
}

// pushImage stores img's blobs and its manifest under repo:tag (tag may be
// "") and repo@digest, and returns the manifest digest.
func (f *fakeRegistry) pushImage(repo, tag string, img image) string {
	for _, blob := range img.blobs() {
		f.blobs[digestOf(blob)] = blob
	}
	return f.pushManifest(repo, tag, mediaTypeOCIManifest, img.manifest())
}

// pushManifest stores a manifest body of mediaType under repo:tag (tag may
// be "") and repo@digest, and returns its digest.
func (f *fakeRegistry) pushManifest(repo, tag, mediaType string, body []byte) string {
	digest := digestOf(body)
	for _, key := range []string{repo + ":" + tag, repo + "@" + digest} {
		if strings.HasSuffix(key, ":") {
			continue
		}
		f.manifests[key] = body
		f.mediaTypes[key] = mediaType
	}
	return digest
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// requests returns what the fake was asked so far.
func (f *fakeRegistry) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{r.Method, r.Host, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("Range")})
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
	if repo, dgst, isBlob := strings.Cut(rest, "/blobs/"); ok && isBlob {
		if f.allowed(w, r, repo) {
			f.serveBlob(w, r, dgst)
		}
		return
	}
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
	if !ok || (f.headOnly && r.Method == http.MethodGet) {
		writeErrors(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
		return
	}
	digest := digestOf(body)
	if f.answerDigest != "" {
		digest = f.answerDigest
	}
	mediaType := f.mediaTypes[key]
	if mediaType == "" {
		mediaType = mediaTypeOCIManifest
	}
	w.Header().Set("Content-Type", mediaType)
	if !f.noDigestHeader {
		w.Header().Set("Docker-Content-Digest", digest)
	}
	if f.noManifestBody {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// serveBlob answers a blob GET, whole or by one "bytes=a-b" range, lying
// as the switches say.
func (f *fakeRegistry) serveBlob(w http.ResponseWriter, r *http.Request, dgst string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeErrors(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "read only")
		return
	}
	if f.blobRedirect != "" {
		http.Redirect(w, r, f.blobRedirect+r.URL.Path, http.StatusTemporaryRedirect)
		return
	}
	if f.blobStatus != 0 {
		writeErrors(w, f.blobStatus, "BLOB_UNKNOWN", "blob unknown to registry")
		return
	}
	blob, ok := f.blobs[dgst]
	if !ok {
		writeErrors(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
		return
	}
	status, body := http.StatusOK, blob
	if start, end, ranged := parseRange(r.Header.Get("Range")); ranged && !f.ignoreRanges {
		shift := f.shiftRanges
		if end+shift >= int64(len(blob)) || start+shift < 0 {
			shift = -shift // still another offset, inside the blob
		}
		start += shift
		end += shift
		if start < 0 || end >= int64(len(blob)) || start > end {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(blob)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		status, body = http.StatusPartialContent, blob[start:end+1]
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(blob)))
	}
	length := len(body)
	if f.truncateBlobs {
		length += 100
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(length))
	w.Header().Set("Docker-Content-Digest", dgst)
	w.WriteHeader(status)
	if f.slowBlobs {
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// parseRange parses "bytes=a-b".
func parseRange(value string) (start, end int64, ok bool) {
	span, found := strings.CutPrefix(value, "bytes=")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, false
	}
	start, errA := strconv.ParseInt(a, 10, 64)
	end, errB := strconv.ParseInt(b, 10, 64)
	return start, end, errA == nil && errB == nil
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
