package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestInstallCopiesARunnableProgram builds the program, installs it into a
// directory as a pre-pull pod's init container does, and runs the copy.
func TestInstallCopiesARunnableProgram(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "noop")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dest := filepath.Join(dir, "shared", "noop")
	if err := os.Mkdir(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "install", dest).CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	st, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o555 {
		t.Errorf("installed mode %v, want 0555", st.Mode().Perm())
	}
	if out, err := exec.Command(dest).CombinedOutput(); err != nil {
		t.Errorf("running the installed copy: %v\n%s", err, out)
	}
	if err := exec.Command(dest, "bogus").Run(); err == nil {
		t.Error("an unknown argument exited 0")
	}
}
