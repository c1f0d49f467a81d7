package imagecache

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parseErrorShape is every message parseDockerConfig may return: none
// quotes the input beyond the path of JSON keys to a value of the wrong
// type.
var parseErrorShape = regexp.MustCompile(`^(not valid JSON( \((syntax error at byte offset \d+|unexpected end of input)\))?` +
	`|not a docker config: unexpected JSON \S+ at .*byte offset \d+\)?` +
	`|an "auth" field is not base64 of "username:password": (invalid base64( at byte \d+)?|no colon in the decoded value))$`)

// fuzzRepos are the repositories every accepted config is looked up with.
var fuzzRepos = []string{"docker.io/library/ubuntu", "registry.example.com/team-a/app", "registry.example.com:5000/x",
	"a.example.com/x", "localhost/x", "quay.io/coreos/etcd"}

// FuzzParseDockerConfig checks that the docker config parser never panics,
// that its errors have one of the known shapes (so they never quote a
// password), and that what it accepts, in either form, survives a round
// trip through the auths form, and gives lookups that only return entries
// matching the repository (or docker hub's entries for a docker hub image),
// in a stable order.
func FuzzParseDockerConfig(f *testing.F) {
	for _, s := range []string{mainConfig, legacyConfig, authwinsConfig, emailonlyConfig, emptyauthConfig, caseauthsConfig,
		unicodeConfig, dockerioConfig, schemehttpsv1Config, noauthsConfig, secretJSON, secretCfg} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, form := range []dockerConfigForm{formAuths, formLegacy} {
			entries, err := parseDockerConfig(data, form)
			if err != nil {
				if !parseErrorShape.MatchString(err.Error()) {
					t.Fatalf("form %d: error of an unknown shape: %q", form, err)
				}
				continue
			}
			// Round trip: written back with username and password fields,
			// the entries read back the same.
			out := map[string]map[string]string{}
			for k, e := range entries {
				out[k] = map[string]string{"username": e.Username, "password": e.Password, "email": e.Email}
			}
			enc, err := json.Marshal(map[string]any{"auths": out})
			if err != nil {
				t.Fatal(err)
			}
			back, err := parseDockerConfig(enc, formAuths)
			if err != nil {
				t.Fatalf("re-encoded config %s does not parse: %v", enc, err)
			}
			if len(entries) > 0 || len(back) > 0 {
				// An "auth" may decode to bytes that are not UTF-8, which
				// JSON cannot carry (the kubelet's hash, also of JSON, sees
				// them the same way): compare as JSON strings.
				asJSON := map[string]dockerConfigEntry{}
				for k, e := range entries {
					asJSON[k] = dockerConfigEntry{jsonString(e.Username), jsonString(e.Password), jsonString(e.Email)}
				}
				if diff := cmp.Diff(asJSON, back); diff != "" {
					t.Fatalf("round trip (-parsed +re-parsed):\n%s", diff)
				}
			}
			k := newDockerKeyring(entries)
			if !slices.IsSortedFunc(k.index, func(a, b string) int { return strings.Compare(b, a) }) {
				t.Fatalf("index not in reverse order: %q", k.index)
			}
			for _, repo := range fuzzRepos {
				got := k.lookup(repo)
				if again := k.lookup(repo); !slices.Equal(got, again) {
					t.Fatalf("lookup(%s) is not stable", repo)
				}
				matched := false
				for _, key := range k.index {
					matched = matched || keyMatches(key, repo)
				}
				for _, c := range got {
					e, ok := entries[c.entry]
					if !ok || e != c.dockerConfigEntry {
						t.Fatalf("lookup(%s) returned %q, not an entry of the config", repo, c.entry)
					}
					key, _ := indexKey(c.entry)
					if matched && !keyMatches(key, repo) {
						t.Fatalf("lookup(%s) returned %q, whose key %q does not match", repo, c.entry, key)
					}
					if !matched && (key != defaultRegistryHost || !isDockerHub(repo)) {
						t.Fatalf("lookup(%s) returned %q without a match", repo, c.entry)
					}
				}
			}
		}
	})
}

// jsonString is s as it reads back after a trip through JSON.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
