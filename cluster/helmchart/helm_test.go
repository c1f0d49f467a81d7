package helmchart_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// helmEnv names the variable that points the tests at a helm program.
const helmEnv = "PULLRECORDS_HELM"

// repoFile is a path in the repository, from this file's directory.
func repoFile(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm program: $PULLRECORDS_HELM, or what
// scripts/helm.sh prints. It fails the test, naming the command that
// builds helm, when neither gives one.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		helmPath = os.Getenv(helmEnv)
		if helmPath == "" {
			script := repoFile("scripts", "helm.sh")
			var stdout, stderr bytes.Buffer
			cmd := exec.Command("bash", script)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				helmErr = fmt.Errorf("%s is not set and %s failed: %w\n%s", helmEnv, script, err, stderr.String())
				return
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			helmPath = strings.TrimSpace(lines[len(lines)-1])
		}
		fi, err := os.Stat(helmPath)
		if err == nil && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
			err = errors.New("not an executable file")
		}
		if err != nil {
			helmErr = fmt.Errorf("helm %q: %w", helmPath, err)
		}
	})
	if helmErr != nil {
		t.Fatalf("no helm: %v\nbuild it with: bash scripts/helm.sh (and set %s to the path it prints)", helmErr, helmEnv)
	}
	return helmPath
}

// kubeVersion is the Kubernetes version the chart is rendered for: that of
// the API server the tests apply it to.
const kubeVersion = "v1.37.2"

// render runs helm template on the chart with the given --set values and
// returns the output.
func render(t *testing.T, set ...string) []byte {
	t.Helper()
	args := []string{"template", "pullrecords", repoFile("deploy", "helm", "pullrecords"), "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := renderErr(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func renderErr(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No user configuration or repositories: only the chart's files.
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+dir, "HELM_CACHE_HOME="+dir, "HELM_DATA_HOME="+dir)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
