package pullmanager

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
