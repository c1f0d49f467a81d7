package credstamp

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// crashDirEnv, when set, makes the test binary a stamping child (TestMain):
// it stamps in a loop in that directory, printing the index of every stamp
// once Stamp has returned, until it is killed.
const crashDirEnv = "CREDSTAMP_CRASH_CHILD_DIR"

// crashKeys is how many keys the child cycles through, so it both creates
// and overwrites files.
const crashKeys = 16

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		stampForever(dir)
		return
	}
	os.Exit(m.Run())
}

func stampForever(dir string) {
	s, err := Open(logr.Discard(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		if err := s.Stamp(testKey(i % crashKeys)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		fmt.Println(i)
	}
}

// A process killed (SIGKILL) while stamping leaves only valid stamps and
// temporary files behind: after reopen every stamp it reported is fresh,
// every stamp-named file is valid, and Prune sweeps the temporary files.
func TestCrashWhileStamping(t *testing.T) {
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		reported := make(map[int]bool)
		lines := bufio.NewScanner(stdout)
		// Kill after a number of stamps that varies by round, so the kill
		// lands at different points of a write.
		for n := 0; n < 40+round*17 && lines.Scan(); n++ {
			i, err := strconv.Atoi(lines.Text())
			if err != nil {
				t.Fatalf("child printed %q", lines.Text())
			}
			reported[i%crashKeys] = true
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if len(reported) == 0 {
			t.Fatalf("round %d: the child reported no stamp; stderr: %s", round, stderr.String())
		}

		s, err := Open(logr.Discard(), dir)
		if err != nil {
			t.Fatalf("round %d: Open after the crash: %v", round, err)
		}
		for i := range reported {
			if !s.Fresh(testKey(i), time.Hour) {
				t.Errorf("round %d: key %d was reported stamped before the kill but is not fresh after reopen", round, i)
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !isStampFileName(e.Name()) {
				continue
			}
			if _, _, err := s.load(e); err != nil {
				t.Errorf("round %d: %s is not a valid stamp after the crash: %v", round, e.Name(), err)
			}
		}
		if _, err := s.Prune(time.Hour); err != nil {
			t.Errorf("round %d: Prune: %v", round, err)
		}
		entries, err = os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !isStampFileName(e.Name()) {
				t.Errorf("round %d: after Prune, %s is left", round, e.Name())
			}
		}
		s.Close()
	}
}
