package pullmanager

import "github.com/pullrecords/pullrecords/imageruntime"

// AuthConfig is a registry credential, with the JSON field names the kubelet's
// credentialprovider.AuthConfig uses. It is imageruntime.AuthConfig, which
// prints and logs without its secrets.
type AuthConfig = imageruntime.AuthConfig

// CredentialHash returns the value the kubelet stores as an
// ImagePullSecret's credentialHash for auth: the lowercase hex SHA-256 of its
// JSON encoding (imageruntime.CredentialHash). A credential read from a
// docker config secret has only Username, Password and Email set. Never log
// the result.
func CredentialHash(auth AuthConfig) string { return imageruntime.CredentialHash(auth) }
