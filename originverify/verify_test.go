package originverify

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pullrecords/pullrecords/imageruntime"
)

const (
	alice        = "alice"
	alicePass    = "alice-pass-SECRET-1"
	aliceRefresh = "alice-refresh-SECRET-2"
	aliceToken   = "alice-registry-SECRET-3"
	repoA        = "team-a/app"
	repoB        = "team-b/app"
)

// world is a fake registry where alice may pull team-a/app only, and both
// repositories hold v1.
type world struct {
	reg              *fakeRegistry
	verifier         *Verifier
	digestA, digestB string
}

func newWorld(t testing.TB, mode authMode) *world {
	t.Helper()
	reg := newFakeRegistry(t, mode)
	reg.addUser(alice, alicePass, repoA)
	reg.refreshTokens[aliceRefresh] = alice
	reg.registryTokens[aliceToken] = alice
	w := &world{reg: reg, verifier: New(WithInsecureRegistries(reg.host()))}
	w.digestA = reg.push(repoA, "v1", "a")
	w.digestB = reg.push(repoB, "v1", "b")
	return w
}

func (w *world) image(repo, ref string) string { return w.reg.host() + "/" + repo + ref }

func password(user, pass string) *imageruntime.AuthConfig {
	return &imageruntime.AuthConfig{Username: user, Password: pass}
}

func TestVerifyAcceptsTheRightCredential(t *testing.T) {
	tests := []struct {
		name string
		mode authMode
		auth *imageruntime.AuthConfig
	}{
		{"anonymous registry, no credential", anonymousAccess, nil},
		{"anonymous registry, a credential is harmless", anonymousAccess, password(alice, alicePass)},
		{"basic", basicAuth, password(alice, alicePass)},
		{"basic from the auth field", basicAuth, &imageruntime.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte(alice + ":" + alicePass))}},
		{"basic with a matching server address", basicAuth, &imageruntime.AuthConfig{Username: alice, Password: alicePass, ServerAddress: "http://HOST/"}},
		{"bearer, password at the token service", bearerAuth, password(alice, alicePass)},
		{"bearer, identity token as refresh token", bearerAuth, &imageruntime.AuthConfig{IdentityToken: aliceRefresh}},
		{"bearer, registry token sent as the bearer", bearerAuth, &imageruntime.AuthConfig{RegistryToken: aliceToken}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.mode)
			if tc.auth != nil {
				tc.auth.ServerAddress = strings.ReplaceAll(tc.auth.ServerAddress, "HOST", w.reg.host())
			}
			got, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1"), tc.auth)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != w.digestA {
				t.Errorf("digest = %s, want %s", got, w.digestA)
			}
			var manifestGets int
			for _, r := range w.reg.requests() {
				if strings.Contains(r.Path, "/manifests/") {
					if r.Method != http.MethodGet {
						t.Errorf("manifest asked with %s, want GET only", r.Method)
					}
					if r.Authorization == "" {
						continue // the unauthenticated first try of a challenge
					}
					manifestGets++
				}
			}
			if tc.mode != anonymousAccess && manifestGets != 1 {
				t.Errorf("%d authenticated manifest GETs, want 1: %+v", manifestGets, w.reg.requests())
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	tests := []struct {
		name       string
		mode       authMode
		setup      func(*world)
		image      func(*world) string
		auth       *imageruntime.AuthConfig
		want       error
		wantStatus int
		wantInMsg  string
	}{
		{name: "basic, wrong password", mode: basicAuth, auth: password(alice, "wrong-SECRET-9"), want: ErrDenied, wantStatus: 401},
		{name: "basic, unknown user", mode: basicAuth, auth: password("mallory", "x-SECRET-9"), want: ErrDenied, wantStatus: 401},
		{name: "basic, other repository", mode: basicAuth, image: imageOf(repoB, ":v1"), auth: password(alice, alicePass), want: ErrDenied, wantStatus: 401},
		{name: "basic, no credential", mode: basicAuth, want: ErrDenied, wantStatus: 401},
		{name: "basic, token only", mode: basicAuth, auth: &imageruntime.AuthConfig{IdentityToken: aliceRefresh}, want: ErrDenied, wantStatus: 401},
		{name: "bearer, wrong password", mode: bearerAuth, auth: password(alice, "wrong-SECRET-9"), want: ErrDenied, wantStatus: 401, wantInMsg: "invalid username or password"},
		{name: "bearer, other repository", mode: bearerAuth, image: imageOf(repoB, ":v1"), auth: password(alice, alicePass), want: ErrDenied, wantStatus: 401},
		{name: "bearer, anonymous token", mode: bearerAuth, want: ErrDenied, wantStatus: 401},
		{name: "bearer, wrong refresh token", mode: bearerAuth, auth: &imageruntime.AuthConfig{IdentityToken: "stolen-SECRET-9"}, want: ErrDenied, wantStatus: 401, wantInMsg: "invalid refresh token"},
		{name: "bearer, refresh token for another repository", mode: bearerAuth, image: imageOf(repoB, ":v1"), auth: &imageruntime.AuthConfig{IdentityToken: aliceRefresh}, want: ErrDenied, wantStatus: 401},
		{name: "bearer, registry token for another repository", mode: bearerAuth, image: imageOf(repoB, ":v1"), auth: &imageruntime.AuthConfig{RegistryToken: aliceToken}, want: ErrDenied, wantStatus: 401},
		{name: "bearer, unknown registry token", mode: bearerAuth, auth: &imageruntime.AuthConfig{RegistryToken: "forged-SECRET-9"}, want: ErrDenied, wantStatus: 401},
		{name: "bearer, wrong refresh token answered 400", mode: bearerAuth, setup: func(w *world) { w.reg.refusalStatus = 400 },
			auth: &imageruntime.AuthConfig{IdentityToken: "stolen-SECRET-9"}, want: ErrDenied, wantStatus: 400, wantInMsg: "token service"},
		{name: "bearer, token service down", mode: bearerAuth, setup: func(w *world) { w.reg.tokenFailWith = 502 },
			auth: password(alice, alicePass), want: ErrUnreachable, wantStatus: 502, wantInMsg: "token service down"},
		{name: "redirects within the origin never end", mode: anonymousAccess, setup: func(w *world) { w.reg.redirectTo = w.reg.server.URL },
			want: ErrUnreachable, wantInMsg: "stopped after 10 redirects"},
		{name: "missing tag", mode: basicAuth, image: imageOf(repoA, ":v2"), auth: password(alice, alicePass), want: ErrNotFound, wantStatus: 404},
		{name: "missing digest", mode: anonymousAccess, image: imageOf(repoA, "@sha256:"+strings.Repeat("0", 64)), want: ErrNotFound, wantStatus: 404},
		{name: "registry answers 500", mode: anonymousAccess, setup: func(w *world) { w.reg.failWith = 500 }, want: ErrUnreachable, wantStatus: 500},
		{name: "registry answers 503", mode: basicAuth, auth: password(alice, alicePass), setup: func(w *world) { w.reg.failWith = 503 }, want: ErrUnreachable, wantStatus: 503},
		{name: "registry answers 429", mode: anonymousAccess, setup: func(w *world) { w.reg.failWith = 429 }, want: ErrUnreachable, wantStatus: 429},
		{name: "by digest, the origin answers another digest", mode: anonymousAccess,
			setup: func(w *world) { w.reg.answerDigest = "sha256:" + strings.Repeat("1", 64) },
			image: func(w *world) string { return w.image(repoA, "@"+w.digestA) }, want: ErrNotProven, wantInMsg: "answered digest sha256:1111"},
		{name: "tag and digest, the origin answers another digest", mode: anonymousAccess,
			setup: func(w *world) { w.reg.answerDigest = "sha256:" + strings.Repeat("1", 64) },
			image: func(w *world) string { return w.image(repoA, ":v1@"+w.digestA) }, want: ErrNotProven},
		{name: "credential for another registry is not sent", mode: basicAuth,
			auth: &imageruntime.AuthConfig{Username: alice, Password: alicePass, ServerAddress: "other.example:5000"}, want: ErrDenied, wantStatus: 401},
		{name: "credential for docker.io is not sent to another registry", mode: bearerAuth,
			auth: &imageruntime.AuthConfig{IdentityToken: aliceRefresh, ServerAddress: "https://index.docker.io/v1/"}, want: ErrDenied, wantStatus: 401},
		{name: "auth field not base64", mode: basicAuth, auth: &imageruntime.AuthConfig{Auth: "%%%not-base64-SECRET-9"}, want: ErrDenied, wantInMsg: "not base64"},
		{name: "auth field without a colon", mode: basicAuth, auth: &imageruntime.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte("nocolon-SECRET-9"))}, want: ErrDenied, wantInMsg: "not base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.mode)
			if tc.setup != nil {
				tc.setup(w)
			}
			image := w.image(repoA, ":v1")
			if tc.image != nil {
				image = tc.image(w)
			}
			digest, err := w.verifier.Verify(context.Background(), image, tc.auth)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %q, %v; want an error matching %v", digest, err, tc.want)
			}
			t.Logf("%v", err)
			if digest != "" {
				t.Errorf("a refusal returned digest %q", digest)
			}
			var oe *OriginError
			if !errors.As(err, &oe) {
				t.Fatalf("error %T is not an *OriginError", err)
			}
			if oe.Registry != w.reg.host() || !strings.Contains(err.Error(), w.reg.host()) {
				t.Errorf("error does not name the registry %s: %v", w.reg.host(), err)
			}
			if !strings.Contains(err.Error(), oe.Repository) || !strings.HasPrefix(image[len(w.reg.host())+1:], oe.Repository) {
				t.Errorf("error does not name the repository: %v", err)
			}
			if !strings.Contains(image, oe.Reference) || !strings.Contains(err.Error(), oe.Reference) {
				t.Errorf("error does not name the reference: %v", err)
			}
			if tc.wantStatus != 0 && oe.StatusCode != tc.wantStatus {
				t.Errorf("status = %d, want %d (%v)", oe.StatusCode, tc.wantStatus, err)
			}
			if tc.wantInMsg != "" && !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantInMsg)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

func imageOf(repo, ref string) func(*world) string {
	return func(w *world) string { return w.image(repo, ref) }
}

// A credential naming another registry never reaches this one: the fake
// sees no Authorization header at all, and the verdict is a denial.
func TestCredentialForAnotherRegistryIsNeverSent(t *testing.T) {
	for _, mode := range []authMode{basicAuth, bearerAuth} {
		w := newWorld(t, mode)
		auth := &imageruntime.AuthConfig{Username: alice, Password: alicePass, IdentityToken: aliceRefresh, RegistryToken: aliceToken, ServerAddress: "other.example:5000"}
		if _, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1"), auth); !errors.Is(err, ErrDenied) {
			t.Errorf("mode %d: Verify = %v, want ErrDenied", mode, err)
		}
		reqs := w.reg.requests()
		if len(reqs) == 0 {
			t.Fatalf("mode %d: the registry was not asked", mode)
		}
		for _, r := range reqs {
			if strings.HasPrefix(r.Authorization, "Basic") || strings.Contains(r.Authorization, "SECRET") {
				t.Errorf("mode %d: %s %s carried the credential: %q", mode, r.Method, r.Path, r.Authorization)
			}
		}
	}
}

// A redirect of the manifest request to another host (a mirror) is
// refused: the other host gets nothing and the verdict is not "may pull".
func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	mirror := newWorld(t, anonymousAccess)
	w := newWorld(t, basicAuth)
	w.reg.redirectTo = mirror.reg.server.URL
	_, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1"), password(alice, alicePass))
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Verify = %v, want ErrUnreachable naming the refused redirect", err)
	}
	if got := mirror.reg.requests(); len(got) != 0 {
		t.Errorf("the other host was asked: %+v", got)
	}
}

// A redirect within the origin (same scheme and host[:port]) is followed,
// with the credential.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	w := newWorld(t, basicAuth)
	w.reg.redirectTo = w.reg.server.URL + "/moved"
	got, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1"), password(alice, alicePass))
	if err != nil || got != w.digestA {
		t.Fatalf("Verify = %q, %v; want %s", got, err, w.digestA)
	}
	followed := false
	for _, r := range w.reg.requests() {
		followed = followed || (strings.HasPrefix(r.Path, "/moved/") && r.Authorization != "")
	}
	if !followed {
		t.Errorf("the redirect was not followed with the credential: %+v", w.reg.requests())
	}
}

// The manifest GET asks for the OCI and Docker manifest and index types,
// and a tag+digest reference is asked by digest.
func TestManifestRequest(t *testing.T) {
	w := newWorld(t, anonymousAccess)
	if _, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1@"+w.digestA), nil); err != nil {
		t.Fatal(err)
	}
	var reqs []seenRequest
	for _, r := range w.reg.requests() {
		if strings.Contains(r.Path, "/manifests/") {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) != 1 {
		t.Fatalf("%d manifest requests, want exactly one manifest GET: %+v", len(reqs), reqs)
	}
	r := reqs[0]
	if r.Method != http.MethodGet || r.Path != "/v2/"+repoA+"/manifests/"+w.digestA {
		t.Errorf("asked %s %s, want GET by digest", r.Method, r.Path)
	}
	for _, mediaType := range []string{
		"application/vnd.oci.image.index.v1+json",
		"application/vnd.oci.image.manifest.v1+json",
		"application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.docker.distribution.manifest.v2+json",
	} {
		if !strings.Contains(r.Accept, mediaType) {
			t.Errorf("Accept %q lacks %s", r.Accept, mediaType)
		}
	}
}

func TestUnreachable(t *testing.T) {
	t.Run("server down", func(t *testing.T) {
		w := newWorld(t, anonymousAccess)
		w.reg.server.Close()
		_, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1"), nil)
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), w.reg.host()) {
			t.Fatalf("Verify = %v, want ErrUnreachable naming %s", err, w.reg.host())
		}
	})
	t.Run("https registry spoken to as https without its CA", func(t *testing.T) {
		srv := quietTLSServer(t, http.NotFoundHandler())
		host := strings.TrimPrefix(srv.URL, "https://")
		_, err := New().Verify(context.Background(), host+"/a:v1", nil)
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Verify = %v, want ErrUnreachable for the TLS failure", err)
		}
	})
	t.Run("cancelled while the registry is silent", func(t *testing.T) {
		entered := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done()
		}))
		defer srv.Close()
		host := strings.TrimPrefix(srv.URL, "http://")
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-entered; cancel() }()
		_, err := New(WithInsecureRegistries(host)).Verify(ctx, host+"/a:v1", nil)
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Verify = %v, want ErrUnreachable", err)
		}
	})
}

func TestHTTPSRegistry(t *testing.T) {
	reg := newFakeRegistry(t, basicAuth)
	reg.server.Close()
	tlsServer := quietTLSServer(t, http.HandlerFunc(reg.serve))
	reg.addUser(alice, alicePass, repoA)
	want := reg.push(repoA, "v1", "a")
	host := strings.TrimPrefix(tlsServer.URL, "https://")
	v := New(WithTransport(tlsServer.Client().Transport))
	got, err := v.Verify(context.Background(), host+"/"+repoA+":v1", password(alice, alicePass))
	if err != nil || got != want {
		t.Fatalf("Verify = %q, %v; want %s", got, err, want)
	}
	// The same registry named insecure is spoken to in plain HTTP, which
	// the TLS server does not answer usefully.
	v = New(WithTransport(tlsServer.Client().Transport), WithInsecureRegistries("http://"+host))
	if _, err := v.Verify(context.Background(), host+"/"+repoA+":v1", password(alice, alicePass)); err == nil {
		t.Fatal("plain HTTP to a TLS server verified")
	}
}

func TestInvalidReference(t *testing.T) {
	for _, image := range []string{"", "Upper:v1", "a b", "registry.example/repo@sha256:short", "-bad"} {
		_, err := New().Verify(context.Background(), image, nil)
		if !errors.Is(err, ErrInvalidReference) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidReference", image, err)
		}
		var oe *OriginError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), "invalid image reference") {
			t.Errorf("Verify(%q): error %v is not a telling *OriginError", image, err)
		}
		if _, err := RegistryHost(image); !errors.Is(err, ErrInvalidReference) {
			t.Errorf("RegistryHost(%q) = %v, want ErrInvalidReference", image, err)
		}
	}
}

// A registry's message is kept, bounded to 200 bytes.
func TestRegistryMessageIsTruncated(t *testing.T) {
	w := newWorld(t, bearerAuth)
	w.reg.tokenErrorMessage = strings.Repeat("é", 300)
	_, err := w.verifier.Verify(context.Background(), w.image(repoA, ":v1"), password(alice, "wrong"))
	var oe *OriginError
	if !errors.As(err, &oe) || !errors.Is(err, ErrDenied) {
		t.Fatalf("Verify = %v, want a denial", err)
	}
	if len(oe.Message) > maxMessageBytes || !strings.Contains(oe.Message, "éé") {
		t.Errorf("message of %d bytes, want at most %d holding the registry's text: %q", len(oe.Message), maxMessageBytes, oe.Message)
	}
	if !strings.HasSuffix(oe.Message, "…") || strings.ContainsRune(oe.Message, '\uFFFD') {
		t.Errorf("message cut badly: %q", oe.Message)
	}
}

// quietTLSServer is an httptest TLS server that does not log the handshake
// failures the tests cause on purpose.
func quietTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
