package originverify

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// No error and no log line ever holds a secret, even when the registry
// echoes what it received (the Authorization header, the refresh token,
// the decoded password) into its error message.
func TestErrorsAndLogsNeverHoldSecrets(t *testing.T) {
	credentials := map[string]*imageruntime.AuthConfig{
		"password":       password(alice, "pw-SECRET-a"),
		"auth field":     {Auth: base64.StdEncoding.EncodeToString([]byte(alice + ":pw-SECRET-b"))},
		"bad auth field": {Auth: "!!SECRET-c!!"},
		"identity token": {IdentityToken: "id-SECRET-d"},
		"registry token": {RegistryToken: "reg-SECRET-e"},
		"right password": password(alice, alicePass),
		"right refresh":  {IdentityToken: aliceRefresh},
		"everything":     {Username: alice, Password: "pw-SECRET-f", Auth: "au-SECRET-g", IdentityToken: "id-SECRET-h", RegistryToken: "reg-SECRET-i"},
	}
	var logged bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(&logged)))
	ctx := klog.NewContext(context.Background(), logger)
	var refusals int
	for _, mode := range []authMode{basicAuth, bearerAuth} {
		w := newWorld(t, mode)
		w.reg.tokenErrorMessage = "refused, you sent: %s"
		for name, auth := range credentials {
			for _, repo := range []string{repoA, repoB} {
				_, err := w.verifier.Verify(ctx, w.image(repo, ":v1"), auth)
				if err == nil {
					continue
				}
				refusals++
				for _, out := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
					if strings.Contains(out, "SECRET") {
						t.Errorf("mode %d, %s, %s: the error shows a secret: %s", mode, name, repo, out)
					}
				}
			}
		}
	}
	if refusals < 10 {
		t.Fatalf("only %d refusals: the scan saw too little", refusals)
	}
	if strings.Contains(logged.String(), "SECRET") {
		t.Errorf("the log shows a secret:\n%s", logged.String())
	}
	if !strings.Contains(logged.String(), "Origin did not accept the pull") {
		t.Errorf("the refusals were not logged at all:\n%s", logged.String())
	}
	// The echoing registry did put secrets into its answers: the scrubbing
	// is what kept them out.
	if !strings.Contains(logged.String(), "<redacted>") {
		t.Errorf("nothing was redacted, so the echo never happened:\n%s", logged.String())
	}
}

func TestScrub(t *testing.T) {
	got := scrub("a pw-long b pw c", []string{"", "pw", "pw-long"})
	if want := "a <redacted> b <redacted> c"; got != want {
		t.Errorf("scrub = %q, want %q", got, want)
	}
}
