package imagecache

import "github.com/pullrecords/pullrecords/imageruntime"

// credentialHash is the kubelet's credential hash of the secret's docker
// config entry, which carries only username, password and email. Never log
// it.
func credentialHash(s *PullSecret) string {
	return imageruntime.CredentialHash(imageruntime.AuthConfig{Username: s.Username, Password: s.Password, Email: s.Email})
}
