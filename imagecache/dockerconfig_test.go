package imagecache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// The kubelet's results for the same inputs cannot be computed here: the
// imagecache module must not require k8s.io/kubernetes. The vectors below
// were produced once by a throwaway program outside this repository that
// required k8s.io/kubernetes v1.37.2 (the kubeletadapter module's
// dependency set), enabled the KubeletEnsureSecretPulledImages feature
// gate, built a v1.Secret (UID uid-1, ns/regcred) of type
// kubernetes.io/dockerconfigjson (or kubernetes.io/dockercfg for the
// legacy config) holding each config, and for each image printed, in
// order, the Username, Password, Email and AuthConfigHash of every
// TrackedAuthConfig that
//
//	keyring, _ := secrets.MakeDockerKeyring([]v1.Secret{secret}, nil)
//	repo, _, _, _ := parsers.ParseImageName(image)
//	keyring.Lookup(repo)
//
// returned: exactly what the kubelet's makeLookupPullCredentialsFunc
// computes for a pod holding that secret. An AuthConfigHash is what the
// kubelet records as the secret's credentialHash (trackedToImagePullCreds).
// Each hash is also recomputed by hand below from the JSON the kubelet
// hashes.
//
// One deliberate difference: for schemehttpsv1Config both entries reduce to
// the index key r.example.com, and upstream returns them in Go map order
// (12 runs: v1 first 11 times, v2 first once). Here the order is the
// lexical order of the keys as written, so v1 first always.

const (
	// mainConfig has every kind of key: host, host/path, a /v2/ prefix
	// with scheme, a glob, a port, the docker hub key with an unpadded
	// "auth", a path prefix, http://, field names in other cases, a key
	// with "?" (a query to url.Parse) and one that is not a URL (ignored).
	mainConfig = `{"auths": {"registry.example.com": {"username": "u-host", "password": "p-host"}, ` +
		`"registry.example.com/team-a": {"auth": "dS10ZWFtOnA6d2l0aDpjb2xvbnM=", "email": "team@example.com"}, ` +
		`"https://registry.example.com/v2/team-a/app": {"username": "u-app", "password": "p-app"}, ` +
		`"*.example.com": {"username": "u-glob", "password": "p-glob"}, ` +
		`"registry.example.com:5000": {"username": "u-port", "password": "p-port"}, ` +
		`"https://index.docker.io/v1/": {"auth": "aHVidXNlcjpodWJwYXNzMQ"}, ` +
		`"quay.io/coreos": {"username": "u-quay", "password": "p-quay"}, ` +
		`"http://insecure.example.org": {"Username": "u-insecure", "PASSWORD": "p-insecure"}, ` +
		`"ex?mple.net": {"username": "u-q", "password": "p-q"}, ` +
		`"[a-c]reg.example.net": {"username": "u-class", "password": "p-class"}}}`
	// legacyConfig is in the .dockercfg form (no "auths").
	legacyConfig = `{"legacy.example.com": {"auth": "bGVnOmFjeQ==", "email": "l@example.com"}, ` +
		`"https://index.docker.io/v1/": {"username": "hub2", "password": "pw2"}}`
	authwinsConfig      = `{"auths": {"r.example.com": {"username": "ignored", "password": "ignored", "auth": "cmVhbDpwYXNz", "email": "e@x"}}}`
	emailonlyConfig     = `{"auths": {"r.example.com": {"email": "only@example.com"}}}`
	emptyauthConfig     = `{"auths":{"r.example.com":{"auth":"","username":"u","password":"p"}}}`
	caseauthsConfig     = `{"AUTHS":{"r.example.com":{"username":"u","password":"p"}}}`
	unicodeConfig       = `{"auths": {"r.example.com": {"username": "\u00fc<>&", "password": "p\u00e4\u2028\"", "email": "\u00e9@x"}}}`
	dockerioConfig      = `{"auths": {"docker.io": {"username": "dio", "password": "x"}, "https://index.docker.io/v1/": {"username": "idx", "password": "y"}}}`
	schemehttpsv1Config = `{"auths": {"https://r.example.com/v1/": {"username": "v1", "password": "x"}, "https://r.example.com/v2/": {"username": "v2", "password": "x"}}}`
	noauthsConfig       = `{"credsStore":"desktop"}`
	// duplicatesConfig repeats a key (the last wins) and has a second
	// "auths" in other case (merged into the same map).
	duplicatesConfig = `{"auths":{"r.example.com":{"username":"a"},"r.example.com":{"username":"b"}},"AUTHS":{"s.example.com":{"Password":"x"}}}`
)

// upstreamCred is one credential the kubelet's keyring returned.
type upstreamCred struct {
	Username, Password, Email, Hash string
}

var upstreamLookups = []struct {
	config string
	image  string
	repo   string // parsers.ParseImageName's repository
	want   []upstreamCred
}{
	// main
	{mainConfig, "registry.example.com/team-a/app:1", "registry.example.com/team-a/app", []upstreamCred{{"u-app", "p-app", "", "c291fe27dfd3cc624e52ad2d403ad73905146e5994ba0efb36eaacfda8e1f3a2"}, {"u-team", "p:with:colons", "team@example.com", "868c68ed44c0c0f124a9e6c8228f5abe276637b55a3e60f92f8bd24141807f5c"}, {"u-host", "p-host", "", "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"}, {"u-glob", "p-glob", "", "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"}}},
	{mainConfig, "registry.example.com/team-a/app/sub@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "registry.example.com/team-a/app/sub", []upstreamCred{{"u-app", "p-app", "", "c291fe27dfd3cc624e52ad2d403ad73905146e5994ba0efb36eaacfda8e1f3a2"}, {"u-team", "p:with:colons", "team@example.com", "868c68ed44c0c0f124a9e6c8228f5abe276637b55a3e60f92f8bd24141807f5c"}, {"u-host", "p-host", "", "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"}, {"u-glob", "p-glob", "", "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"}}},
	{mainConfig, "registry.example.com:5000/x:1", "registry.example.com:5000/x", []upstreamCred{{"u-port", "p-port", "", "1d2980c693d8cf4cb0c2a98579e322ea9fbb617a4218f3e5a7d21ca4a88a6dd6"}}},
	{mainConfig, "other.example.com/x", "other.example.com/x", []upstreamCred{{"u-glob", "p-glob", "", "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"}}},
	{mainConfig, "a.b.example.com/x", "a.b.example.com/x", []upstreamCred{}},
	{mainConfig, "example.com/x", "example.com/x", []upstreamCred{}},
	{mainConfig, "ubuntu", "docker.io/library/ubuntu", []upstreamCred{{"hubuser", "hubpass1", "", "bdd44c2e61ae768cb2a1aa1e94b6d9de66082e582806271d9e4e55c8738a9348"}}},
	{mainConfig, "docker.io/library/busybox:1.36", "docker.io/library/busybox", []upstreamCred{{"hubuser", "hubpass1", "", "bdd44c2e61ae768cb2a1aa1e94b6d9de66082e582806271d9e4e55c8738a9348"}}},
	{mainConfig, "index.docker.io/library/busybox", "docker.io/library/busybox", []upstreamCred{{"hubuser", "hubpass1", "", "bdd44c2e61ae768cb2a1aa1e94b6d9de66082e582806271d9e4e55c8738a9348"}}},
	{mainConfig, "quay.io/coreos/etcd:v3", "quay.io/coreos/etcd", []upstreamCred{{"u-quay", "p-quay", "", "e0199edf5ae22a704efdb3ad3b0eb82fac5cfd99f5a788514b48a362ac345781"}}},
	{mainConfig, "quay.io/other/x", "quay.io/other/x", []upstreamCred{}},
	{mainConfig, "registry.example.com/team-abc/x", "registry.example.com/team-abc/x", []upstreamCred{{"u-team", "p:with:colons", "team@example.com", "868c68ed44c0c0f124a9e6c8228f5abe276637b55a3e60f92f8bd24141807f5c"}, {"u-host", "p-host", "", "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"}, {"u-glob", "p-glob", "", "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"}}},
	{mainConfig, "registry.example.com/x", "registry.example.com/x", []upstreamCred{{"u-host", "p-host", "", "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"}, {"u-glob", "p-glob", "", "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"}}},
	{mainConfig, "localhost:5000/x", "localhost:5000/x", []upstreamCred{}},
	{mainConfig, "localhost/x", "localhost/x", []upstreamCred{{"hubuser", "hubpass1", "", "bdd44c2e61ae768cb2a1aa1e94b6d9de66082e582806271d9e4e55c8738a9348"}}},
	{mainConfig, "insecure.example.org/x", "insecure.example.org/x", []upstreamCred{{"u-insecure", "p-insecure", "", "cb5b921506c89c227cda19953741c88a919b58887d01cd97c38cfc9b9d73a4ea"}}},
	{mainConfig, "REGISTRY.EXAMPLE.COM/x", "REGISTRY.EXAMPLE.COM/x", []upstreamCred{}},
	{mainConfig, "example.net/x", "example.net/x", []upstreamCred{}},
	{mainConfig, "exemple.net/x", "exemple.net/x", []upstreamCred{}},
	{mainConfig, "breg.example.net/y", "breg.example.net/y", []upstreamCred{}},
	{mainConfig, "dreg.example.net/y", "dreg.example.net/y", []upstreamCred{}},
	{mainConfig, "registry.example.com/team-a", "registry.example.com/team-a", []upstreamCred{{"u-team", "p:with:colons", "team@example.com", "868c68ed44c0c0f124a9e6c8228f5abe276637b55a3e60f92f8bd24141807f5c"}, {"u-host", "p-host", "", "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"}, {"u-glob", "p-glob", "", "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"}}},
	// legacy
	{legacyConfig, "legacy.example.com/a/b:1", "legacy.example.com/a/b", []upstreamCred{{"leg", "acy", "l@example.com", "d9a1596a6846c199b79e308b1bc4c43a3c12aaede3251a7f2ddc862fd5960f09"}}},
	{legacyConfig, "ubuntu", "docker.io/library/ubuntu", []upstreamCred{{"hub2", "pw2", "", "2c36cacbe172227a1ddacf4815e59d0228dc8e27b07bd5842d107bea5622b282"}}},
	{legacyConfig, "legacy.example.com:443/a", "legacy.example.com:443/a", []upstreamCred{}},
	// authwins
	{authwinsConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{{"real", "pass", "e@x", "87706dbe5f0c62dc840e57d38d860245e68659395d4bcb5794a04374e35aae87"}}},
	// emailonly
	{emailonlyConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{{"", "", "only@example.com", "44a0dcc2378724bfd7af6fde22e2f0550f023a45efa52fee5e3b4684fc183b04"}}},
	// emptyauth
	{emptyauthConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{{"u", "p", "", "edbd57ca9372e64eb1c9070ecf3a049ac553596b0529acf034c7a71d4e618e88"}}},
	// caseauths
	{caseauthsConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{{"u", "p", "", "edbd57ca9372e64eb1c9070ecf3a049ac553596b0529acf034c7a71d4e618e88"}}},
	// unicode
	{unicodeConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{{"\u00fc<>&", "p\u00e4\u2028\"", "\u00e9@x", "454e68062fe17d4d272d61fa6cd3f0bd965227ea7a41189cec61b94a8d651eee"}}},
	// dockerio
	{dockerioConfig, "ubuntu", "docker.io/library/ubuntu", []upstreamCred{{"dio", "x", "", "7b3e52cf7af7c803892c6be0cfc8d96bf975a2996b8f65d899dcbe34d6b54baa"}}},
	{dockerioConfig, "docker.io/x/y", "docker.io/x/y", []upstreamCred{{"dio", "x", "", "7b3e52cf7af7c803892c6be0cfc8d96bf975a2996b8f65d899dcbe34d6b54baa"}}},
	{dockerioConfig, "localhost/x", "localhost/x", []upstreamCred{{"idx", "y", "", "85d6fc5683e8c68fd8301fefa751ab4a044da7d0c2a929c6b95e3423b88066da"}}},
	// schemehttpsv1
	{schemehttpsv1Config, "r.example.com/a", "r.example.com/a", []upstreamCred{{"v1", "x", "", "882440b35ec2ffdaacf890596bf65c1a5d70f4969b85e375e71c8c9066bdc54f"}, {"v2", "x", "", "9f09ebd8cafb03d712c1b1584ff74afc3d1a6a572c49deaf09ed5393dfe1cc4f"}}},
	// noauths
	{noauthsConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{}},
	// duplicates
	{duplicatesConfig, "r.example.com/a", "r.example.com/a", []upstreamCred{{"b", "", "", "0d416f19d6d3f6b055f3d6814227e53a46fb945ba53b735c7cbb71e50037cbf8"}}},
	{duplicatesConfig, "s.example.com/b", "s.example.com/b", []upstreamCred{{"", "x", "", "e706dfe4ff2ca129d7682db134703cb675948cf0d37e8860e5d5f2455a856a60"}}},
}

func formOf(config string) dockerConfigForm {
	if config == legacyConfig {
		return formLegacy
	}
	return formAuths
}

// TestLookupMatchesKubelet checks parsing, matching, order and credential
// hashes against the kubelet's results for the same secrets and images.
func TestLookupMatchesKubelet(t *testing.T) {
	for _, tc := range upstreamLookups {
		t.Run(tc.image, func(t *testing.T) {
			entries, err := parseDockerConfig([]byte(tc.config), formOf(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			repo, err := normalizedRepo(tc.image)
			if err != nil || repo != tc.repo {
				t.Fatalf("repository of %q = %q, %v; want %q", tc.image, repo, err, tc.repo)
			}
			got := []upstreamCred{}
			for _, c := range newDockerKeyring(entries).lookup(repo) {
				got = append(got, upstreamCred{c.Username, c.Password, c.Email,
					credentialHash(&PullSecret{Username: c.Username, Password: c.Password, Email: c.Email})})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lookup(%q) (-kubelet +got):\n%s", repo, diff)
			}
		})
	}
}

// TestCredentialHashVectors recomputes the kubelet's hashes above by hand:
// the SHA-256 of the JSON of an AuthConfig with only username, password and
// email, empty ones omitted, with encoding/json's HTML and line-separator
// escaping.
func TestCredentialHashVectors(t *testing.T) {
	for _, tc := range []struct {
		json string
		hash string
	}{
		{`{"username":"u-host","password":"p-host"}`, "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"},
		{`{"username":"u-team","password":"p:with:colons","email":"team@example.com"}`, "868c68ed44c0c0f124a9e6c8228f5abe276637b55a3e60f92f8bd24141807f5c"},
		{`{"email":"only@example.com"}`, "44a0dcc2378724bfd7af6fde22e2f0550f023a45efa52fee5e3b4684fc183b04"},
		{`{"username":"real","password":"pass","email":"e@x"}`, "87706dbe5f0c62dc840e57d38d860245e68659395d4bcb5794a04374e35aae87"},
		{`{"username":"ü\u003c\u003e\u0026","password":"pä\u2028\"","email":"é@x"}`, "454e68062fe17d4d272d61fa6cd3f0bd965227ea7a41189cec61b94a8d651eee"},
	} {
		sum := sha256.Sum256([]byte(tc.json))
		if got := hex.EncodeToString(sum[:]); got != tc.hash {
			t.Errorf("sha256(%s) = %s, want the kubelet's %s", tc.json, got, tc.hash)
		}
	}
}

// normalizedRepo is the repository the kubelet looks credentials up with.
func normalizedRepo(image string) (string, error) { return pullmanager.NormalizeImageName(image) }

// Malformed configs fail as they fail in the kubelet (the same vectors
// gave errors there: a bad "auth" fails the whole secret), and no message
// holds any of the file's text.
func TestParseDockerConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		form dockerConfigForm
		want string
	}{
		{"bad base64", `{"auths":{"r.example.com":{"auth":"!!!"}}}`, formAuths, `"auth" field is not base64`},
		// The kubelet fails this secret too: the first value's "auth" is
		// decoded before the duplicate replaces it.
		{"bad auth overwritten by a duplicate key", `{"auths":{"r.example.com":{"auth":"!!!"},"r.example.com":{"username":"u"}}}`, formAuths, `"auth" field is not base64`},
		{"no colon", `{"auths":{"r.example.com":{"auth":"bm9jb2xvbg=="}}}`, formAuths, "no colon"},
		{"padded with a trailing space", `{"auths":{"r.example.com":{"auth":"YTpi "}}}`, formAuths, "invalid base64"},
		{"truncated", `{"auths":`, formAuths, "not valid JSON"},
		{"syntax error inside a password", `{"auths":{"r.example.com":{"password":"hunter2` + "\x01" + `"}}}`, formAuths, "syntax error at byte offset"},
		{"empty", ``, formAuths, "not valid JSON"},
		{"entry of the wrong type", `{"auths":{"r.example.com":"hunter2"}}`, formAuths, "unexpected JSON string"},
		{"password of the wrong type", `{"auths":{"r.example.com":{"password":12345}}}`, formAuths, "unexpected JSON number"},
		{"legacy: not a map", `["hunter2"]`, formLegacy, "unexpected JSON array"},
		{"auths form: top level array", `["hunter2"]`, formAuths, "unexpected JSON array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDockerConfig([]byte(tc.data), tc.form)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseDockerConfig(%q) = %v, want an error containing %q", tc.data, err, tc.want)
			}
			for _, secret := range []string{"hunter2", "12345", "!!!", "bm9jb2xvbg", "nocolon", "YTpi"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q quotes the file (%q)", err, secret)
				}
			}
		})
	}
	// Accepted as upstream accepts them.
	for _, data := range []string{`{}`, `null`, `{"auths":null}`, `{"auths":{"r.example.com":null}}`, `{"auths":{},"HttpHeaders":{"x":"y"}}`} {
		if _, err := parseDockerConfig([]byte(data), formAuths); err != nil {
			t.Errorf("parseDockerConfig(%s) = %v, want no error", data, err)
		}
	}
}

func TestFileForm(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       dockerConfigForm
	}{
		{"config.json", `{"auths":{}}`, formAuths},
		{"config.json", `{"Auths":{"r":{}}}`, formAuths},
		{"config.json", legacyConfig, formLegacy},
		{"config.json", noauthsConfig, formAuths},
		{"config.json", `{"auths":{},"r.example.com":{}}`, formAuths},
		{"config.json", `{}`, formAuths},
		{"config.json", `not json`, formAuths},
		{".dockercfg", `{"auths":{"r":{}}}`, formLegacy},
		{".dockerconfigjson", legacyConfig, formAuths},
	} {
		if got := fileForm(filepath.Join("/x", tc.name), []byte(tc.data)); got != tc.want {
			t.Errorf("fileForm(%s, %s) = %v, want %v", tc.name, tc.data, got, tc.want)
		}
	}
}

// writeFile writes data at dir/name (making dir) and returns the path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mountSecret lays out dir as the kubelet's atomic writer lays out a
// secret volume: the data in a timestamped directory, a ..data link to it,
// and one link per key through ..data. Calling it again on the same dir
// rotates the secret the way the kubelet does: a new timestamped
// directory, then ..data replaced by a rename.
func mountSecret(t *testing.T, dir string, data map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts, err := os.MkdirTemp(dir, "..2026_01_02_03_04_05.")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

const (
	secretJSON = `{"auths":{"registry.example.com":{"username":"robot","password":"pa55-json","auth":"cm9ib3Q6cGE1NS1qc29u"}}}`
	secretCfg  = `{"registry.example.com":{"auth":"bGVnYWN5OnBhNTUtY2Zn","email":"l@example.com"}}`
)

// TestReadDockerConfig reads every supported layout from real files, and
// refuses the broken ones with a message naming the path and holding no
// secret.
func TestReadDockerConfig(t *testing.T) {
	root := t.TempDir()
	big := `{"auths":{"registry.example.com":{"username":"robot","password":"` + strings.Repeat("x", maxDockerConfigSize) + `"}}}`
	atLimit := `{"auths":{"registry.example.com":{"username":"robot","password":"` +
		strings.Repeat("y", maxDockerConfigSize-len(`{"auths":{"registry.example.com":{"username":"robot","password":""}}}`)) + `"}}}`
	tests := []struct {
		name     string
		setup    func(dir string) string // returns the DockerConfigPath
		wantUser string                  // of registry.example.com; "" for an error
		wantFile string                  // relative to dir: the file read, or named by the error
		wantErr  string
	}{
		{name: "auths file", setup: func(d string) string { return writeFile(t, d, "config.json", secretJSON) },
			wantUser: "robot", wantFile: "config.json"},
		{name: "legacy file named .dockercfg", setup: func(d string) string { return writeFile(t, d, ".dockercfg", secretCfg) },
			wantUser: "legacy", wantFile: ".dockercfg"},
		{name: "legacy content in another name", setup: func(d string) string { return writeFile(t, d, "creds", secretCfg) },
			wantUser: "legacy", wantFile: "creds"},
		{name: "mounted dockerconfigjson secret", setup: func(d string) string {
			mountSecret(t, d, map[string]string{".dockerconfigjson": secretJSON})
			return d
		}, wantUser: "robot", wantFile: ".dockerconfigjson"},
		{name: "mounted dockercfg secret", setup: func(d string) string {
			mountSecret(t, d, map[string]string{".dockercfg": secretCfg})
			return d
		}, wantUser: "legacy", wantFile: ".dockercfg"},
		{name: "directory with both keys prefers .dockerconfigjson", setup: func(d string) string {
			mountSecret(t, d, map[string]string{".dockerconfigjson": secretJSON, ".dockercfg": secretCfg})
			return d
		}, wantUser: "robot", wantFile: ".dockerconfigjson"},
		{name: "the mounted file itself", setup: func(d string) string {
			mountSecret(t, d, map[string]string{".dockerconfigjson": secretJSON})
			return filepath.Join(d, ".dockerconfigjson")
		}, wantUser: "robot", wantFile: ".dockerconfigjson"},
		{name: "exactly 1 MiB", setup: func(d string) string { return writeFile(t, d, "config.json", atLimit) },
			wantUser: "robot", wantFile: "config.json"},

		{name: "missing file", setup: func(d string) string { return filepath.Join(d, "nope.json") },
			wantFile: "nope.json", wantErr: "no such file"},
		{name: "not JSON", setup: func(d string) string {
			return writeFile(t, d, "config.json", `{"auths":{"registry.example.com":{"password":pa55-json`)
		},
			wantFile: "config.json", wantErr: "not valid JSON"},
		{name: "larger than 1 MiB", setup: func(d string) string { return writeFile(t, d, "config.json", big) },
			wantFile: "config.json", wantErr: "larger than 1048576 bytes"},
		{name: "bad auth in a mounted secret", setup: func(d string) string {
			mountSecret(t, d, map[string]string{".dockerconfigjson": `{"auths":{"r":{"auth":"pa55-json"}}}`})
			return d
		}, wantFile: ".dockerconfigjson", wantErr: `"auth" field`},
		{name: "directory without a secret key", setup: func(d string) string {
			mountSecret(t, d, map[string]string{"token": "pa55-json"})
			return d
		}, wantFile: "", wantErr: "neither .dockerconfigjson nor .dockercfg"},
		{name: "dangling link", setup: func(d string) string {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "config.json")
			if err := os.Symlink("gone", p); err != nil {
				t.Fatal(err)
			}
			return p
		}, wantFile: "config.json", wantErr: "no such file"},
		{name: "FIFO", setup: func(d string) string {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "config.json")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, wantFile: "config.json", wantErr: "not a regular file"},
		{name: ".dockerconfigjson is a directory", setup: func(d string) string {
			if err := os.MkdirAll(filepath.Join(d, ".dockerconfigjson"), 0o700); err != nil {
				t.Fatal(err)
			}
			return d
		}, wantFile: ".dockerconfigjson", wantErr: "not a regular file"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, strings.Repeat("d", i+1))
			path := tc.setup(dir)
			entries, file, err := readDockerConfig(path)
			if want := filepath.Join(dir, tc.wantFile); file != want {
				t.Errorf("file = %q, want %q", file, want)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("readDockerConfig = %v, want an error containing %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), filepath.Join(dir, tc.wantFile)) {
					t.Errorf("error %q does not name %s", err, filepath.Join(dir, tc.wantFile))
				}
				if strings.Contains(err.Error(), "pa55") || strings.Count(err.Error(), filepath.Join(dir, tc.wantFile)) > 1 {
					t.Errorf("error %q quotes the file or repeats the path", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := entries["registry.example.com"].Username; got != tc.wantUser {
				t.Errorf("user = %q, want %q", got, tc.wantUser)
			}
		})
	}

}

func TestResolveCredentials(t *testing.T) {
	dir := t.TempDir()
	mountSecret(t, dir, map[string]string{".dockerconfigjson": mainConfig})
	s := &PullSecret{Namespace: "ns", Name: "regcred", UID: "uid-1", DockerConfigPath: dir}

	got, err := resolveCredentials(s, "registry.example.com/team-a/app:1")
	if err != nil {
		t.Fatal(err)
	}
	var entries, users []string
	var secrets []accessor.ImagePullSecret
	for _, c := range got {
		entries = append(entries, c.entry)
		users = append(users, c.auth.Username+":"+c.auth.Password)
		secrets = append(secrets, c.secret)
		if c.auth.Email != "" || c.auth.Auth != "" {
			t.Errorf("auth for the runtime carries more than username and password: %v", c.auth)
		}
	}
	if diff := cmp.Diff([]string{"https://registry.example.com/v2/team-a/app", "registry.example.com/team-a", "registry.example.com", "*.example.com"}, entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"u-app:p-app", "u-team:p:with:colons", "u-host:p-host", "u-glob:p-glob"}, users); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	want := []accessor.ImagePullSecret{
		{UID: "uid-1", Namespace: "ns", Name: "regcred", CredentialHash: "c291fe27dfd3cc624e52ad2d403ad73905146e5994ba0efb36eaacfda8e1f3a2"},
		{UID: "uid-1", Namespace: "ns", Name: "regcred", CredentialHash: "868c68ed44c0c0f124a9e6c8228f5abe276637b55a3e60f92f8bd24141807f5c"},
		{UID: "uid-1", Namespace: "ns", Name: "regcred", CredentialHash: "656a1623f3dca7f17e388202e86d4bccc0a0e255627022f86657f2c6c0ef0889"},
		{UID: "uid-1", Namespace: "ns", Name: "regcred", CredentialHash: "d397a647be3f99e887f9bebbc954825409480ff253554e15a61bbbe34550301d"},
	}
	if diff := cmp.Diff(want, secrets); diff != "" {
		t.Errorf("recorded secrets (-kubelet +got):\n%s", diff)
	}

	for _, tc := range []struct {
		image, reason, msg string
	}{
		{"quay.io/other/x:1", ReasonNoCredentials, "has no entry for the registry of quay.io/other/x"},
		{"Not/A/Valid:Image", ReasonNoCredentials, "cannot pick a credential"},
	} {
		_, err := resolveCredentials(s, tc.image)
		var ce *credentialError
		if !errors.As(err, &ce) || ce.reason != tc.reason || !strings.Contains(ce.msg, tc.msg) || !strings.Contains(ce.msg, "ns/regcred") {
			t.Errorf("resolveCredentials(%s) = %v, want %s: ...%s...", tc.image, err, tc.reason, tc.msg)
		}
	}
	_, err = resolveCredentials(&PullSecret{Namespace: "ns", Name: "regcred", DockerConfigPath: filepath.Join(dir, "missing")}, "registry.example.com/x")
	var ce *credentialError
	if !errors.As(err, &ce) || ce.reason != ReasonDockerConfigError {
		t.Errorf("missing config: %v, want %s", err, ReasonDockerConfigError)
	}

	// Inline credentials: one, hashed as before.
	got, err = resolveCredentials(aliceSecret, "anything/at:all")
	if err != nil || len(got) != 1 || got[0].auth.Username != "alice" || got[0].secret.CredentialHash != credentialHash(aliceSecret) {
		t.Errorf("inline: %+v, %v", got, err)
	}
	if got, err := resolveCredentials(nil, "x"); got != nil || err != nil {
		t.Errorf("anonymous: %v, %v", got, err)
	}
}

func TestValidatePullSecret(t *testing.T) {
	ref := CacheRef{"ns", "c"}
	for _, tc := range []struct {
		name   string
		secret *PullSecret
		want   string // "" for valid
	}{
		{"nil", nil, ""},
		{"inline", aliceSecret, ""},
		{"path", &PullSecret{Namespace: "ns", Name: "s", DockerConfigPath: "/etc/secret"}, ""},
		{"path and password", &PullSecret{Namespace: "ns", Name: "s", Password: "p", DockerConfigPath: "/etc/secret"}, "sets both"},
		{"path and username", &PullSecret{Namespace: "ns", Name: "s", Username: "u", DockerConfigPath: "/etc/secret"}, "sets both"},
		{"path and email", &PullSecret{Namespace: "ns", Name: "s", Email: "e", DockerConfigPath: "/etc/secret"}, "sets both"},
		{"relative path", &PullSecret{Namespace: "ns", Name: "s", DockerConfigPath: "secret/dir"}, "not an absolute path"},
	} {
		err := validatePullSecret(ref, tc.secret)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidCache) || !errors.Is(err, ErrInvalidPullSecret) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidCache and ErrInvalidPullSecret: ...%s...", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), `"p"`) || strings.Contains(err.Error(), "Password: p") {
			t.Errorf("%s: error shows the password: %v", tc.name, err)
		}
	}
}
