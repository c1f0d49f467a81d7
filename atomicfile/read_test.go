package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(dir, "state", []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(dir, "state", 5); err != nil || string(got) != "hello" {
		t.Errorf("ReadFile = %q, %v; want hello", got, err)
	}
	if _, err := ReadFile(dir, "state", 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the limit = %v; want ErrTooLarge", err)
	}
	if _, err := ReadFile(dir, "absent", 5); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file = %v; want ErrNotExist", err)
	}
}

func TestReadFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "fifo", "sub", "../" + filepath.Base(filepath.Dir(outside)) + "/secret"} {
		data, err := ReadFile(dir, name, 1<<20)
		if err == nil {
			t.Errorf("ReadFile(%q) = %q; want an error", name, data)
			continue
		}
		if strings.Contains(string(data), "not yours") {
			t.Errorf("ReadFile(%q) read the file outside", name)
		}
	}
}
