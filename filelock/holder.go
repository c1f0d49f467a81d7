package filelock

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Holder is the record a lock's holder writes into the lock file.
type Holder struct {
	// PID is the holder's process ID; 0 when unknown.
	PID int `json:"pid"`
	// Started is when the holder's process started, to tell it from a later
	// process that reused the PID; zero when unknown.
	Started time.Time `json:"started"`
}

// String names the holder for a message: "process 42 (started
// 2026-01-02T03:04:05Z)", "process 42", or "another process" when unknown.
func (h Holder) String() string {
	if h.PID <= 0 {
		return "another process"
	}
	s := "process " + strconv.Itoa(h.PID)
	if !h.Started.IsZero() {
		s += " (started " + h.Started.UTC().Format(time.RFC3339) + ")"
	}
	return s
}

// self is this process's record.
var self = Holder{PID: os.Getpid(), Started: processStarted()}

// Self returns the record this process writes when it takes a lock.
func Self() Holder { return self }

// processStarted is when this process started: from /proc on Linux (the
// value ps shows), else, truncated to the second, when this package was
// initialised.
func processStarted() time.Time {
	if t, ok := startTime("/proc/self/stat"); ok {
		return t
	}
	return time.Now().UTC().Truncate(time.Second)
}

// startTime reads a process's start time from its /proc/<pid>/stat (field
// 22, clock ticks since boot) and the boot time from /proc/stat. Linux's
// user-visible clock tick (USER_HZ) is 100 on every architecture.
func startTime(statPath string) (time.Time, bool) {
	stat, err := os.ReadFile(statPath)
	if err != nil {
		return time.Time{}, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	const startTimeField = 22 - 3 // fields 3.. follow the ')'
	if len(fields) <= startTimeField {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseUint(fields[startTimeField], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	all, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for line := range strings.Lines(string(all)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			const userHZ = 100
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / userHZ).UTC(), true
		}
	}
	return time.Time{}, false
}

// maxRecord bounds what readHolder reads of a lock file.
const maxRecord = 4096

// readHolder reads the record in a lock file; ok is false when there is
// none that names a process.
func readHolder(f *os.File) (h Holder, ok bool) {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, maxRecord))
	if err != nil {
		return Holder{}, false
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &h); err != nil || h.PID <= 0 {
		return Holder{}, false
	}
	return h, true
}

// writeHolder replaces the content of the lock file f with h.
func writeHolder(f *os.File, h Holder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(append(data, '\n'), 0)
	return err
}
