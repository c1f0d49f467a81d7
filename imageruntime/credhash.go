package imageruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// AuthConfig is a registry credential, with the JSON field names the kubelet's
// credentialprovider.AuthConfig uses. Only its JSON form matters here: it is
// what CredentialHash hashes.
type AuthConfig struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Auth     string `json:"auth,omitempty"`
	// Email is set from docker config files; deprecated there.
	Email         string `json:"email,omitempty"`
	ServerAddress string `json:"serveraddress,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// CredentialHash returns the value the kubelet stores as an
// ImagePullSecret's credentialHash for auth: the lowercase hex SHA-256 of its
// JSON encoding. A credential read from a docker config secret has only
// Username, Password and Email set. Never log the result.
func CredentialHash(auth AuthConfig) string {
	b, err := json.Marshal(auth)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

const redacted = "<redacted>"

// redactedCopy returns a with every secret field replaced, for printing.
func (a AuthConfig) redactedCopy() authConfigForPrinting {
	hide := func(s string) string {
		if s == "" {
			return ""
		}
		return redacted
	}
	return authConfigForPrinting{
		Username:      a.Username,
		Password:      hide(a.Password),
		Auth:          hide(a.Auth),
		Email:         a.Email,
		ServerAddress: a.ServerAddress,
		IdentityToken: hide(a.IdentityToken),
		RegistryToken: hide(a.RegistryToken),
	}
}

// authConfigForPrinting has AuthConfig's fields and none of its methods, so
// printing it does not recurse.
type authConfigForPrinting AuthConfig

// String shows the user name and server, never a password or token.
func (a AuthConfig) String() string {
	return fmt.Sprintf("%+v", a.redactedCopy())
}

// GoString makes %#v redact as well.
func (a AuthConfig) GoString() string {
	return fmt.Sprintf("imageruntime.AuthConfig%+v", a.redactedCopy())
}

// MarshalLog makes klog and logr print the redacted form.
func (a AuthConfig) MarshalLog() any {
	return a.redactedCopy()
}
