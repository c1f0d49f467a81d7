package imagecache

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// This file resolves a PullSecret given by DockerConfigPath into the
// credentials a pull of one image uses, the way the kubelet turns a pod's
// docker config secret into registry credentials. The upstream code it
// follows (k8s.io/kubernetes v1.37.2) is named at each step:
//
//   - pkg/credentialprovider/config.go: the two file formats
//     (DockerConfigJSON with "auths", the legacy DockerConfig map),
//     DockerConfigEntry.UnmarshalJSON and decodeDockerConfigFieldAuth (an
//     "auth" field, base64 of "user:password", padded or not, replaces
//     username and password).
//   - pkg/credentialprovider/keyring.go: BasicDockerKeyring.Add (entry key
//     to index key: scheme dropped, a /v1/ or /v2/ path prefix dropped),
//     BasicDockerKeyring.Lookup (index in reverse lexical order, so a
//     longer path before its prefix and an exact host before a glob; the
//     docker hub fallback through isDefaultRegistryMatch) and URLsMatch
//     (same port, same number of host labels, a glob per label with
//     filepath.Match, the entry's path a string prefix of the image's).
//   - pkg/credentialprovider/secrets/secrets.go: a dockerconfigjson secret
//     is read as DockerConfigJSON and a dockercfg secret as DockerConfig.
//   - pkg/kubelet/images/image_manager.go (makeLookupPullCredentialsFunc):
//     the lookup is made with parsers.ParseImageName's repository, the
//     normalized name (docker.io/library/ubuntu for ubuntu).
//   - pkg/credentialprovider/keyring.go (hashAuthConfig) and
//     BasicDockerKeyring.Add: the credential hash is the SHA-256 of the JSON
//     of an AuthConfig holding only the entry's username, password and
//     email (credentialHash here).
//
// The one place upstream is not deterministic: entries whose keys reduce
// to the same index key (for example "https://r.example/v1/" and
// "https://r.example/v2/") are kept in Go map iteration order, which is
// random. Here they are kept in the lexical order of their keys as written.

const (
	// dockerConfigJSONKey and dockercfgKey are the data keys (and so the
	// file names in a mounted volume) of secrets of type
	// kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg.
	dockerConfigJSONKey = ".dockerconfigjson"
	dockercfgKey        = ".dockercfg"
	// maxDockerConfigSize bounds a docker config file; a larger one is
	// refused. (The API server caps a Secret at 1 MiB too.)
	maxDockerConfigSize = 1 << 20
	// defaultRegistryHost is the index key the docker hub fallback uses.
	defaultRegistryHost = "index.docker.io"
)

// dockerConfigForm is the layout of a docker config file.
type dockerConfigForm int

const (
	// formAuths is {"auths": {"<registry>": {...}}}: ~/.docker/config.json
	// and a kubernetes.io/dockerconfigjson secret.
	formAuths dockerConfigForm = iota
	// formLegacy is {"<registry>": {...}}: ~/.dockercfg and a
	// kubernetes.io/dockercfg secret.
	formLegacy
)

// dockerConfigEntry is one registry's entry after the "auth" field has
// been decoded.
type dockerConfigEntry struct {
	Username string
	Password string
	Email    string
}

// UnmarshalJSON reads an entry as the kubelet does: the four fields by
// encoding/json's rules (so field names match case-insensitively), and a
// non-empty "auth" replaces username and password; an "auth" that does not
// decode fails the whole file.
func (e *dockerConfigEntry) UnmarshalJSON(data []byte) error {
	var raw struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Email    string `json:"email,omitempty"`
		Auth     string `json:"auth,omitempty"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	e.Username, e.Password, e.Email = raw.Username, raw.Password, raw.Email
	if raw.Auth == "" {
		return nil
	}
	user, pass, err := decodeAuthField(raw.Auth)
	if err != nil {
		return err
	}
	e.Username, e.Password = user, pass
	return nil
}

// authFieldError is a malformed "auth" field. Its message never holds any
// of the field.
type authFieldError struct{ detail string }

func (e *authFieldError) Error() string {
	return `an "auth" field is not base64 of "username:password": ` + e.detail
}

// decodeAuthField splits base64("user:password"). As upstream, a field
// ending in "=" (after trimming spaces) is decoded as padded base64, any
// other as unpadded, and the text is split at its first colon.
func decodeAuthField(field string) (user, pass string, err error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		enc = base64.StdEncoding
	}
	raw, err := enc.DecodeString(field)
	if err != nil {
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) {
			return "", "", &authFieldError{detail: fmt.Sprintf("invalid base64 at byte %d", int64(corrupt))}
		}
		return "", "", &authFieldError{detail: "invalid base64"}
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", &authFieldError{detail: "no colon in the decoded value"}
	}
	return user, pass, nil
}

// parseDockerConfig decodes data in the given form into its entries, keyed
// by the registry keys as written. An error says what is wrong without
// quoting the data.
func parseDockerConfig(data []byte, form dockerConfigForm) (map[string]dockerConfigEntry, error) {
	var entries map[string]dockerConfigEntry
	var err error
	if form == formLegacy {
		err = json.Unmarshal(data, &entries)
	} else {
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		err = json.Unmarshal(data, &cfg)
		entries = cfg.Auths
	}
	if err != nil {
		return nil, describeJSONError(err)
	}
	return entries, nil
}

// describeJSONError rewrites a decoding error so that it holds no byte of
// the input's values: encoding/json's syntax errors quote the offending
// character and its type errors a misplaced number, either of which may be
// part of a password. (The JSON keys leading to a misplaced value are
// kept: they are registry names and field names.)
func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var auth *authFieldError
	switch {
	case errors.As(err, &auth):
		return auth
	case errors.As(err, &syntax):
		return fmt.Errorf("not valid JSON (syntax error at byte offset %d)", syntax.Offset)
	case errors.As(err, &typ):
		where := fmt.Sprintf("byte offset %d", typ.Offset)
		if typ.Field != "" {
			where = fmt.Sprintf("%s (byte offset %d)", typ.Field, typ.Offset)
		}
		// Value is the kind, followed for a number by its digits: keep
		// the kind only.
		kind, _, _ := strings.Cut(typ.Value, " ")
		return fmt.Errorf("not a docker config: unexpected JSON %s at %s", kind, where)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not valid JSON (unexpected end of input)")
	}
	return errors.New("not valid JSON")
}

// fileForm picks the form of a docker config file given by path: by name
// for the two secret keys, otherwise by content: the auths form when the
// top-level object has an "auths" member (in any case, as encoding/json
// matches field names) or is not a map of objects, the legacy form when
// every top-level member is an object (a file such as {"credsStore": "x"}
// is therefore read in the auths form, and has no entries).
func fileForm(path string, data []byte) dockerConfigForm {
	switch filepath.Base(path) {
	case dockerConfigJSONKey:
		return formAuths
	case dockercfgKey:
		return formLegacy
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil || len(top) == 0 {
		return formAuths
	}
	for k, v := range top {
		if strings.EqualFold(k, "auths") {
			return formAuths
		}
		if t := strings.TrimLeft(string(v), " \t\r\n"); !strings.HasPrefix(t, "{") {
			return formAuths
		}
	}
	return formLegacy
}

// dockerConfigError is a docker config that could not be read or parsed.
// Its message names the file and never holds its content.
type dockerConfigError struct {
	path string
	err  error
}

func (e *dockerConfigError) Error() string {
	return fmt.Sprintf("docker config %s: %v", e.path, e.err)
}

func (e *dockerConfigError) Unwrap() error { return e.err }

// readDockerConfig reads the docker config at path, a file or a directory
// where a secret of type kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg is mounted (the directory's .dockerconfigjson
// is used when present, else its .dockercfg; a secret volume's ..data
// links are followed). It returns the entries and the file read.
func readDockerConfig(path string) (map[string]dockerConfigEntry, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, path, &dockerConfigError{path: path, err: pathErrorCause(err)}
	}
	if !fi.IsDir() {
		data, err := readDockerConfigFile(path)
		if err != nil {
			return nil, path, &dockerConfigError{path: path, err: err}
		}
		entries, err := parseDockerConfig(data, fileForm(path, data))
		if err != nil {
			return nil, path, &dockerConfigError{path: path, err: err}
		}
		return entries, path, nil
	}
	for _, c := range []struct {
		name string
		form dockerConfigForm
	}{{dockerConfigJSONKey, formAuths}, {dockercfgKey, formLegacy}} {
		file := filepath.Join(path, c.name)
		data, err := readDockerConfigFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, file, &dockerConfigError{path: file, err: err}
		}
		entries, err := parseDockerConfig(data, c.form)
		if err != nil {
			return nil, file, &dockerConfigError{path: file, err: err}
		}
		return entries, file, nil
	}
	return nil, path, &dockerConfigError{path: path,
		err: fmt.Errorf("the directory holds neither %s nor %s (a mounted kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg secret)", dockerConfigJSONKey, dockercfgKey)}
}

// readDockerConfigFile reads a regular file of at most maxDockerConfigSize
// bytes, following links (a mounted secret's files are links). It opens
// without blocking so that a FIFO at the path cannot hang a worker.
func readDockerConfigFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathErrorCause(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathErrorCause(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDockerConfigSize+1))
	if err != nil {
		return nil, pathErrorCause(err)
	}
	if len(data) > maxDockerConfigSize {
		return nil, fmt.Errorf("larger than %d bytes (1 MiB)", maxDockerConfigSize)
	}
	return data, nil
}

// pathErrorCause drops the path from an *fs.PathError (the caller names
// the file itself), keeping errors.Is(err, fs.ErrNotExist) and the like.
func pathErrorCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// registryCredential is one docker config entry indexed for lookups.
type registryCredential struct {
	// entry is the registry key as written in the file.
	entry string
	dockerConfigEntry
}

// dockerKeyring indexes a docker config's entries the way the kubelet's
// BasicDockerKeyring does.
type dockerKeyring struct {
	// index holds the distinct index keys in reverse lexical order.
	index []string
	creds map[string][]registryCredential
}

// newDockerKeyring indexes entries. An entry whose key is not a URL is
// ignored, as upstream ignores it.
func newDockerKeyring(entries map[string]dockerConfigEntry) *dockerKeyring {
	k := &dockerKeyring{creds: map[string][]registryCredential{}}
	for _, raw := range slices.Sorted(maps.Keys(entries)) {
		key, ok := indexKey(raw)
		if !ok {
			continue
		}
		if _, seen := k.creds[key]; !seen {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], registryCredential{entry: raw, dockerConfigEntry: entries[raw]})
	}
	slices.Sort(k.index)
	slices.Reverse(k.index)
	return k
}

// indexKey turns an entry's key into the host (with port) plus path the
// index uses: "https://" is assumed when there is no scheme, the scheme is
// dropped, and so are a leading /v1 or /v2 of the path and a path that is
// only "/".
func indexKey(entry string) (string, bool) {
	s := entry
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[len("/v1"):]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// lookup returns the credentials for repo (a normalized repository name
// such as docker.io/library/ubuntu), most specific index key first; within
// one index key in the order of the entries' keys as written. Without a
// match, a docker hub image gets the index.docker.io entries.
func (k *dockerKeyring) lookup(repo string) []registryCredential {
	var out []registryCredential
	for _, key := range k.index {
		if keyMatches(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out
	}
	if isDockerHub(repo) {
		return k.creds[defaultRegistryHost]
	}
	return nil
}

// keyMatches reports whether the index key (whose host labels may be
// globs) covers repo: same port, same number of host labels, each label
// matching its glob, and the key's path a prefix (as a string) of repo's.
func keyMatches(key, repo string) bool {
	ku, err := url.Parse("https://" + key)
	if err != nil {
		return false
	}
	ru, err := url.Parse("https://" + repo)
	if err != nil {
		return false
	}
	kLabels, kPort := hostLabels(ku.Host)
	rLabels, rPort := hostLabels(ru.Host)
	if kPort != rPort || len(kLabels) != len(rLabels) || !strings.HasPrefix(ru.Path, ku.Path) {
		return false
	}
	for i, glob := range kLabels {
		if ok, err := filepath.Match(glob, rLabels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// hostLabels splits host[:port] into its dot-separated labels and port.
func hostLabels(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// isDockerHub reports whether repo pulls from docker hub by the kubelet's
// rule (isDefaultRegistryMatch): a first component that is docker.io or
// index.docker.io, or one without a dot or colon (so, as upstream,
// localhost/x counts), or no slash at all.
func isDockerHub(repo string) bool {
	first, _, hasSlash := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !hasSlash:
		return true
	case first == "docker.io" || first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// validatePullSecret checks that s names one source of credentials: inline
// fields or DockerConfigPath, which must then be absolute (the state file
// keeps it, and a later manager may run in another working directory).
func validatePullSecret(ref CacheRef, s *PullSecret) error {
	if s == nil || s.DockerConfigPath == "" {
		return nil
	}
	if s.Username != "" || s.Password != "" || s.Email != "" {
		return fmt.Errorf("%w: %s: %w: pull secret %s/%s sets both inline credentials (Username, Password, Email) and DockerConfigPath; set only one",
			ErrInvalidCache, ref, ErrInvalidPullSecret, s.Namespace, s.Name)
	}
	if !filepath.IsAbs(s.DockerConfigPath) {
		return fmt.Errorf("%w: %s: %w: pull secret %s/%s: DockerConfigPath %q is not an absolute path",
			ErrInvalidCache, ref, ErrInvalidPullSecret, s.Namespace, s.Name, s.DockerConfigPath)
	}
	return nil
}

// pullCredential is one credential a pull may try, and the secret a pull
// made with it is recorded for.
type pullCredential struct {
	auth   imageruntime.AuthConfig
	secret accessor.ImagePullSecret
	// entry is the docker config key it came from; "" for inline
	// credentials.
	entry string
}

// credentialError says why a pull secret gives no credential for an image;
// the pull fails with its reason, without being tried.
type credentialError struct {
	reason string
	msg    string
}

func (e *credentialError) Error() string { return e.msg }

// resolveCredentials returns the credentials a pull of image with s tries,
// in order: none for nil (an anonymous pull), the inline credential, or
// every entry of s's docker config that matches image's registry, read
// now (so a rotated mounted secret is honoured), in the kubelet's order.
// A docker config without a matching entry is an error: a cache with a
// pull secret never pulls anonymously.
func resolveCredentials(s *PullSecret, image string) ([]pullCredential, error) {
	if s == nil {
		return nil, nil
	}
	secret := accessor.ImagePullSecret{UID: s.UID, Namespace: s.Namespace, Name: s.Name}
	if s.DockerConfigPath == "" {
		secret.CredentialHash = credentialHash(s)
		return []pullCredential{{auth: imageruntime.AuthConfig{Username: s.Username, Password: s.Password}, secret: secret}}, nil
	}
	who := "pull secret " + s.Namespace + "/" + s.Name
	entries, file, err := readDockerConfig(s.DockerConfigPath)
	if err != nil {
		return nil, &credentialError{reason: ReasonDockerConfigError, msg: who + ": " + err.Error()}
	}
	repo, err := pullmanager.NormalizeImageName(image)
	if err != nil {
		return nil, &credentialError{reason: ReasonNoCredentials,
			msg: fmt.Sprintf("%s: cannot pick a credential from docker config %s: %v", who, file, err)}
	}
	found := newDockerKeyring(entries).lookup(repo)
	if len(found) == 0 {
		return nil, &credentialError{reason: ReasonNoCredentials,
			msg: fmt.Sprintf("%s: docker config %s has no entry for the registry of %s (none of its %d entries matches), and a cache with a pull secret never pulls anonymously",
				who, file, repo, len(entries))}
	}
	out := make([]pullCredential, 0, len(found))
	for _, c := range found {
		sec := secret
		sec.CredentialHash = credentialHash(&PullSecret{Username: c.Username, Password: c.Password, Email: c.Email})
		out = append(out, pullCredential{auth: imageruntime.AuthConfig{Username: c.Username, Password: c.Password}, secret: sec, entry: c.entry})
	}
	return out, nil
}
