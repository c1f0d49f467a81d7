package crishim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// NodeCredentials are the node's own registry credentials (a Docker config
// JSON, as in /var/lib/kubelet/config.json), by registry host. The gate uses
// them for a pull that carries no credential, as the runtime would. The zero
// value and nil hold none.
type NodeCredentials struct {
	byHost map[string]nodeCredential
}

type nodeCredential struct {
	auth *imageruntime.AuthConfig // never modified once parsed
	hash string                   // imageruntime.CredentialHash(*auth)
	key  string                   // the stamps' Key.Credential: CredentialNode + ":" + hash
}

// dockerConfig is the part of a Docker config JSON used here.
type dockerConfig struct {
	Auths map[string]dockerConfigEntry `json:"auths"`
}

type dockerConfigEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// ParseNodeCredentials parses a Docker config JSON
// ({"auths":{"host":{"auth":…,"username":…,"password":…,"identitytoken":…,
// "registrytoken":…}}}). A key may be "host", "host:port" or a URL such as
// "https://index.docker.io/v1/"; Docker Hub's names are one registry. An
// "auth" field is base64 of "user:password" and, when set, gives the user
// name and password. An entry with no credential at all (a credential
// store's placeholder) is skipped. Two keys naming one registry with different
// credentials, a key without a host, or a bad "auth" are errors matching
// ErrInvalidNodeCredentials that name the key, never the secret.
func ParseNodeCredentials(dockerConfigJSON []byte) (*NodeCredentials, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(dockerConfigJSON, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidNodeCredentials, describeJSONError(err))
	}
	keys := make([]string, 0, len(cfg.Auths))
	for k := range cfg.Auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c := &NodeCredentials{byHost: make(map[string]nodeCredential, len(keys))}
	from := make(map[string]string, len(keys)) // host → the key it came from
	for _, key := range keys {
		host := imageruntime.RegistryHost(key)
		if host == "" {
			return nil, fmt.Errorf("%w: registry key %q names no host", ErrInvalidNodeCredentials, key)
		}
		auth, ok, err := cfg.Auths[key].authConfig(host)
		if err != nil {
			return nil, fmt.Errorf("%w: registry key %q: %w", ErrInvalidNodeCredentials, key, err)
		}
		if !ok {
			continue // an entry without a credential (a credential store's placeholder)
		}
		if prev, ok := c.byHost[host]; ok {
			if *prev.auth != auth {
				return nil, fmt.Errorf("%w: registry keys %q and %q both name %s, with different credentials", ErrInvalidNodeCredentials, from[host], key, host)
			}
			continue
		}
		h := imageruntime.CredentialHash(auth)
		c.byHost[host] = nodeCredential{auth: &auth, hash: h, key: CredentialNode + ":" + h}
		from[host] = key
	}
	return c, nil
}

// LoadNodeCredentials reads and parses the Docker config JSON at path; an
// error names the file.
func LoadNodeCredentials(path string) (*NodeCredentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading node credentials: %w", err)
	}
	c, err := ParseNodeCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// authConfig returns the credential of e for host; ok is false for an entry
// with no credential at all.
func (e dockerConfigEntry) authConfig(host string) (a imageruntime.AuthConfig, ok bool, err error) {
	a = imageruntime.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		ServerAddress: host,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return imageruntime.AuthConfig{}, false, errors.New(`"auth" is not valid base64`)
		}
		user, password, found := strings.Cut(string(raw), ":")
		if !found {
			return imageruntime.AuthConfig{}, false, errors.New(`"auth" is not base64 of user:password`)
		}
		a.Username, a.Password = user, password
	}
	if a.Username == "" && a.Password == "" && a.IdentityToken == "" && a.RegistryToken == "" {
		return imageruntime.AuthConfig{}, false, nil
	}
	return a, true, nil
}

// describeJSONError describes a JSON decoding error without quoting the
// input, which may hold a secret.
func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q is a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	default:
		return "not a Docker config JSON"
	}
}

// For returns the node's credential for image's registry, or nil if there
// is none (or image does not parse). The result is a copy.
func (c *NodeCredentials) For(image string) *imageruntime.AuthConfig {
	p, err := parseImage(image)
	if err != nil {
		return nil
	}
	nc, ok := c.forHost(p.host)
	if !ok {
		return nil
	}
	a := *nc.auth
	return &a
}

func (c *NodeCredentials) forHost(host string) (nodeCredential, bool) {
	if c == nil {
		return nodeCredential{}, false
	}
	nc, ok := c.byHost[host]
	return nc, ok
}
