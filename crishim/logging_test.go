package crishim

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// Every decision logs one line naming the pod, image, credential kind and
// result, and up to V(3) no line (the manager's included) holds a password,
// token or credential hash.
func TestLogsOneLinePerDecisionAndNoSecret(t *testing.T) {
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 3})
	ctx := klog.NewContext(context.Background(), logger)

	node, err := ParseNodeCredentials([]byte(`{"auths":{"node.example.com":{"username":"node","password":"node-secret-pw","identitytoken":"node-identity-token"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) {
		c.Node = node
		c.MirrorOnly = []string{"mirror.example.com"}
	})
	tokenAuth := &imageruntime.AuthConfig{Username: "carol", RegistryToken: "carol-registry-token", ServerAddress: "registry.example.com"}
	f.verifier.allow(authA, privRepo, digest1)
	f.verifier.allow(node.For("node.example.com/a:1"), "node.example.com/a", digest2)
	reqs := []Request{
		{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA},     // accepted
		{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA},     // remembered
		{Image: privRepo + "@" + digest1, Auth: tokenAuth, Pod: tenantB}, // denied
		{Image: "node.example.com/a:1", Pod: tenantB},                    // node credential
		{Image: "mirror.example.com/x:1", Auth: authA, Pod: tenantA},     // mirror-only
		{Image: "Not/A/Valid:Ref", Auth: authA, Pod: tenantA},            // invalid
	}
	for _, req := range reqs {
		_, _ = f.gate.Admit(ctx, req)
	}
	if len(lines) != len(reqs) {
		t.Errorf("%d log lines for %d decisions:\n%s", len(lines), len(reqs), strings.Join(lines, "\n"))
	}
	secrets := []string{
		authA.Password, tokenAuth.RegistryToken, "node-secret-pw", "node-identity-token",
		imageruntime.CredentialHash(*authA), imageruntime.CredentialHash(*tokenAuth), imageruntime.CredentialHash(*node.For("node.example.com/a:1")),
	}
	for i, line := range lines {
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("log line %d holds a secret: %s", i, line)
			}
		}
		for _, key := range []string{`"pod"=`, `"image"=`, `"result"=`} {
			if !strings.Contains(line, key) {
				t.Errorf("log line %d lacks %s: %s", i, key, line)
			}
		}
	}
	for i, want := range []string{`"result"="accepted"`, `"remembered"=true`, `"result"="denied"`, `"credential"="node"`, `"result"="mirror_only"`, `"result"="invalid"`} {
		if i < len(lines) && !strings.Contains(lines[i], want) {
			t.Errorf("log line %d lacks %s: %s", i, want, lines[i])
		}
	}
}
