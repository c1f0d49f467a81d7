package originverify

import (
	"encoding/base64"
	"slices"
	"strings"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// errUnusableAuth is the message for an AuthConfig whose Auth field is not
// base64 of "user:password". It names no part of the field.
const errUnusableAuth = "the credential's auth field is not base64 of user:password; nothing was sent"

// credentialFor returns what is presented to registry (as RegistryHost
// gives it) for auth, as containerd does: nothing when auth is nil or names
// another registry in ServerAddress, else its user name and password (from
// Auth when both are empty), its identity token as the refresh token and
// its registry token as the access token. ok is false, with a message, when
// Auth cannot be decoded.
func credentialFor(registry string, a *imageruntime.AuthConfig) (cred auth.Credential, ok bool) {
	if a == nil {
		return auth.EmptyCredential, true
	}
	if a.ServerAddress != "" && imageruntime.RegistryHost(a.ServerAddress) != registry {
		return auth.EmptyCredential, true
	}
	cred = auth.Credential{
		Username:     a.Username,
		Password:     a.Password,
		RefreshToken: a.IdentityToken,
		AccessToken:  a.RegistryToken,
	}
	if a.Username == "" && a.Password == "" && a.Auth != "" {
		user, pass, decoded := decodeAuth(a.Auth)
		if !decoded {
			return auth.EmptyCredential, false
		}
		cred.Username, cred.Password = user, pass
	}
	return cred, true
}

// decodeAuth splits a docker config "auth" value (base64 of user:password).
func decodeAuth(field string) (user, pass string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(field))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	return user, pass, ok
}

// secretsOf lists every secret string auth carries (and the parts decoded
// from its Auth field), for scrubbing messages.
func secretsOf(a *imageruntime.AuthConfig) []string {
	if a == nil {
		return nil
	}
	secrets := []string{a.Password, a.Auth, a.IdentityToken, a.RegistryToken}
	if _, pass, ok := decodeAuth(a.Auth); ok {
		secrets = append(secrets, pass)
	}
	return secrets
}

// scrub replaces every non-empty secret in s, longest first so that a
// secret containing another is removed whole.
func scrub(s string, secrets []string) string {
	sorted := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		if secret != "" {
			sorted = append(sorted, secret)
		}
	}
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) })
	for _, secret := range sorted {
		s = strings.ReplaceAll(s, secret, "<redacted>")
	}
	return s
}
