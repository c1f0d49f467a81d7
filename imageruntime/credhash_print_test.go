package imageruntime

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2/textlogger"
)

// Printing or logging an AuthConfig must never show a password or a token,
// while its JSON form (what CredentialHash hashes) keeps them.
func TestAuthConfigNeverPrintsSecrets(t *testing.T) {
	auth := AuthConfig{Username: "robot", Password: "pw-SECRET-1", Auth: "auth-SECRET-2",
		IdentityToken: "id-SECRET-3", RegistryToken: "reg-SECRET-4", ServerAddress: "registry.example"}
	var logged bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logged)))
	logger.Info("Pulling", "auth", auth, "authPtr", &auth)
	outputs := map[string]string{
		"%v":  fmt.Sprintf("%v", auth),
		"%+v": fmt.Sprintf("%+v", auth),
		"%#v": fmt.Sprintf("%#v", auth),
		"%s":  fmt.Sprintf("%s", auth),
		"ptr": fmt.Sprintf("%v", &auth),
		"log": logged.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, "SECRET") {
			t.Errorf("%s shows a secret: %s", name, out)
		}
		if !strings.Contains(out, "robot") {
			t.Errorf("%s lost the user name: %s", name, out)
		}
	}
	if CredentialHash(auth) == CredentialHash(AuthConfig{Username: "robot", ServerAddress: "registry.example"}) {
		t.Error("the hash no longer covers the secret fields")
	}
}

func ExampleRegistryHost() {
	fmt.Println(RegistryHost("https://index.docker.io/v1/"))
	fmt.Println(RegistryHost("HTTPS://Registry.Example:5000/"))
	// Output:
	// docker.io
	// registry.example:5000
}
