package fsstore

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

var (
	crashRounds = flag.Int("crash-rounds", 50, "rounds of TestCrashRecovery")
	crashSeed   = flag.Int64("crash-seed", 20261130, "seed of TestCrashRecovery's operations and kill delays (0: from the clock)")
)

const (
	crashEnvDir  = "PULLRECORDS_CRASH_DIR"
	crashEnvSeed = "PULLRECORDS_CRASH_SEED"
	crashKeys    = 6
)

// crashOp is operation i of the crash workload: deterministic in (seed, i).
type crashOp struct {
	i      int
	intent bool
	key    int
	delete bool
}

func crashOpFor(rng *rand.Rand, i int) crashOp {
	return crashOp{i: i, intent: rng.Intn(2) == 0, key: rng.Intn(crashKeys), delete: rng.Intn(10) < 3}
}

func crashImage(k int) string { return fmt.Sprintf("registry.example.com/crash/app-%d:latest", k) }
func crashRef(k int) string   { return fmt.Sprintf("sha256:crash-%d", k) }

// crashRecord is the value write i stores: unique per i.
func crashRecord(op crashOp) *accessor.ImagePulledRecord {
	return &accessor.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(testTime.Add(time.Duration(op.i) * time.Second)),
		ImageRef:        crashRef(op.key),
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example.com/crash/app": {KubernetesSecrets: []accessor.ImagePullSecret{
				{UID: "uid-" + strconv.Itoa(op.i), Namespace: "ns", Name: "secret", CredentialHash: strings.Repeat("ab", 32)},
			}},
		},
	}
}

// runCrashWorkload runs operations against s from op start on, writing
// "ack <i>" to w after each returns, until stop says so.
func runCrashWorkload(logger klog.Logger, s *Store, seed int64, w io.Writer, stop func(i int) bool) error {
	rng := rand.New(rand.NewSource(seed))
	for i := 0; !stop(i); i++ {
		op := crashOpFor(rng, i)
		var err error
		switch {
		case op.intent && op.delete:
			err = s.DeleteImagePullIntent(logger, crashImage(op.key))
		case op.intent:
			err = s.WriteImagePullIntent(logger, crashImage(op.key))
		case op.delete:
			err = s.DeleteImagePulledRecord(logger, crashRef(op.key))
		default:
			err = s.WriteImagePulledRecord(logger, crashRecord(op))
		}
		if err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		if _, err := fmt.Fprintf(w, "ack %d\n", i); err != nil {
			return err
		}
	}
	return nil
}

// crashState is the expected content of the store: per key, the record
// (records) or a non-nil marker (intents); absent keys are nil.
type crashState struct {
	records [crashKeys]*accessor.ImagePulledRecord
	intents [crashKeys]bool
}

func (st *crashState) apply(op crashOp) {
	switch {
	case op.intent:
		st.intents[op.key] = !op.delete
	case op.delete:
		st.records[op.key] = nil
	default:
		st.records[op.key] = crashRecord(op)
	}
}

// TestCrashHelper is the child of TestCrashRecovery when run with the
// environment set. Run directly, it runs a short workload in-process and
// checks the acknowledgements and the final state.
func TestCrashHelper(t *testing.T) {
	logger := testLogger(t)
	if dir := os.Getenv(crashEnvDir); dir != "" {
		seed, err := strconv.ParseInt(os.Getenv(crashEnvSeed), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(klog.Background(), dir) // with fsync
		if err != nil {
			fmt.Fprintf(os.Stdout, "error %v\n", err)
			os.Exit(3)
		}
		fmt.Fprintln(os.Stdout, "ready")
		// Runs until killed.
		err = runCrashWorkload(logger, s, seed, os.Stdout, func(int) bool { return false })
		fmt.Fprintf(os.Stdout, "error %v\n", err)
		os.Exit(3)
	}
	dir := t.TempDir()
	s := openStore(t, dir)
	var out strings.Builder
	const n = 60
	if err := runCrashWorkload(logger, s, 1, &out, func(i int) bool { return i == n }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "ack "); got != n {
		t.Errorf("%d acknowledgements, want %d", got, n)
	}
	s.Close() // checkCrashState opens the store as the next writer
	var want crashState
	rng := rand.New(rand.NewSource(1))
	for i := range n {
		want.apply(crashOpFor(rng, i))
	}
	checkCrashState(t, dir, &want, nil)
}

// checkCrashState opens dir and checks it holds want, except that the key
// of the in-flight operation (if any) may also hold its new state. It
// returns what the store holds.
func checkCrashState(t *testing.T, dir string, want *crashState, inflight *crashOp) crashState {
	t.Helper()
	s, err := New(testLogger(t), dir)
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	defer s.Close()
	if tmps := tempFiles(t, dir); len(tmps) != 0 {
		t.Errorf("temp files after open: %v", tmps)
	}
	if _, err := s.ListImagePulledRecords(); err != nil {
		t.Errorf("records after crash: %v", err)
	}
	if _, err := s.ListImagePullIntents(); err != nil {
		t.Errorf("intents after crash: %v", err)
	}
	alt := *want
	if inflight != nil {
		alt.apply(*inflight)
	}
	var got crashState
	for k := range crashKeys {
		rec, _, err := s.GetImagePulledRecord(crashRef(k))
		if err != nil {
			t.Errorf("record %d: %v", k, err)
		}
		got.records[k] = rec
		ok, err := s.ImagePullIntentExists(crashImage(k))
		if err != nil {
			t.Errorf("intent %d: %v", k, err)
		}
		got.intents[k] = ok
		if cmp.Diff(want.records[k], rec) != "" && cmp.Diff(alt.records[k], rec) != "" {
			t.Errorf("record %d: got %v, want %v (or in-flight %v)", k, rec, want.records[k], alt.records[k])
		}
		if ok != want.intents[k] && ok != alt.intents[k] {
			t.Errorf("intent %d: got %v, want %v (or in-flight %v)", k, ok, want.intents[k], alt.intents[k])
		}
	}
	return got
}

// TestCrashRecovery kills a writer process (which syncs) at random moments
// and checks after each kill that the store opens cleanly, that every
// acknowledged operation is there (the last per key wins), that the one
// in-flight operation is wholly old or wholly new, and that no temporary or
// undecodable file remains.
func TestCrashRecovery(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -crash-seed=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	var state crashState
	totalAcks := 0
	for round := range *crashRounds {
		childSeed := rng.Int63()
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvSeed+"="+strconv.FormatInt(childSeed, 10))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the child to open the store, then let it run a while.
		for line := range lines {
			if line == "ready" {
				break
			}
			if strings.HasPrefix(line, "error") {
				t.Fatalf("round %d: child: %s", round, line)
			}
		}
		time.Sleep(time.Duration(rng.Intn(30_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		acked := -1
		for line := range lines {
			if n, ok := strings.CutPrefix(line, "ack "); ok {
				i, err := strconv.Atoi(n)
				if err != nil || i != acked+1 {
					t.Fatalf("round %d: bad line %q after ack %d", round, line, acked)
				}
				acked = i
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("round %d: child: %s", round, line)
			}
		}
		cmd.Wait()
		totalAcks += acked + 1
		opRng := rand.New(rand.NewSource(childSeed))
		for i := 0; i <= acked; i++ {
			state.apply(crashOpFor(opRng, i))
		}
		inflight := crashOpFor(opRng, acked+1)
		got := checkCrashState(t, dir, &state, &inflight)
		if t.Failed() {
			t.Fatalf("round %d (child seed %d) failed after %d acknowledged operations", round, childSeed, acked+1)
		}
		// The in-flight operation may have landed: continue from what is there.
		state = got
	}
	t.Logf("%d rounds, %d acknowledged operations", *crashRounds, totalAcks)
	if totalAcks == 0 {
		t.Error("no child ever acknowledged an operation")
	}
}
