package apiservertest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// BinDirEnv names the environment variable that, when set, points BinDir at a
// directory holding kube-apiserver, etcd and kubelet instead of building them.
const BinDirEnv = "PULLRECORDS_K8S_BIN"

// binaryNames are the programs BinDir promises.
var binaryNames = []string{"kube-apiserver", "etcd", "kubelet"}

// BinDir returns the directory holding kube-apiserver, etcd and kubelet:
// $PULLRECORDS_K8S_BIN if set, else the cache directory where the
// repository's scripts/k8s-binaries.sh builds them. It builds nothing (a
// cold build takes about ten minutes, not something to start inside go
// test): if they are not built, the error says to run that script. It
// checks that all three programs are present and executable.
func BinDir() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("apiservertest: %s is not set and the repository is not found: %w", BinDirEnv, err)
		}
		script := filepath.Join(root, "scripts", "k8s-binaries.sh")
		var stdout, stderr bytes.Buffer
		cmd := exec.Command("bash", script, "--check")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("apiservertest: %s --check: %w: %s", script, err, tail(stderr.Bytes(), 30))
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		dir = strings.TrimSpace(lines[len(lines)-1])
		if dir == "" {
			return "", fmt.Errorf("apiservertest: %s printed no directory", script)
		}
	}
	for _, name := range binaryNames {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("apiservertest: binary directory %s: %w (set %s or run scripts/k8s-binaries.sh)", dir, err, BinDirEnv)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("apiservertest: %s is not an executable file", p)
		}
	}
	return dir, nil
}

// repoRoot finds the repository root: first from this source file's location
// (cluster/apiservertest/bindir.go), then by walking up from the working
// directory to the directory holding go.work and scripts/k8s-binaries.sh.
func repoRoot() (string, error) {
	isRoot := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "scripts", "k8s-binaries.sh"))
		return err == nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if isRoot(dir) {
			return dir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil && isRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("no directory holding go.work and scripts/k8s-binaries.sh above " + wd)
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	s := strings.TrimRight(string(b), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
