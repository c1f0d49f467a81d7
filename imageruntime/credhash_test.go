package imageruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The hash is over the kubelet's JSON form: its field names, empty fields
// left out.
func TestCredentialHashIsOverTheKubeletJSON(t *testing.T) {
	tests := []struct {
		auth AuthConfig
		json string
	}{
		{AuthConfig{}, `{}`},
		{AuthConfig{Username: "u", Password: "p", Email: "e@example.com"}, `{"username":"u","password":"p","email":"e@example.com"}`},
		{AuthConfig{Auth: "a", ServerAddress: "s", IdentityToken: "i", RegistryToken: "r"}, `{"auth":"a","serveraddress":"s","identitytoken":"i","registrytoken":"r"}`},
	}
	for _, tc := range tests {
		sum := sha256.Sum256([]byte(tc.json))
		if got, want := CredentialHash(tc.auth), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("CredentialHash(%v) = %s, want the SHA-256 of %s (%s)", tc.auth, got, tc.json, want)
		}
	}
}
