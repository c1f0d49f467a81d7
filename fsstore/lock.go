package fsstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// LockFile is the advisory lock file a writable store holds, in
// <kubeletDir>/image_manager, beside the pulling and pulled directories. The
// kubelet reads only those two directories and never sees it.
const LockFile = ".pullrecords.lock"

// LockedError is returned by New (and Repair) when another writer, in this
// process or another one, holds the store's lock. It matches ErrLocked.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process ID, as the holder wrote it into the lock
	// file; 0 when unknown.
	PID int
	// Started is when the holder's process started, to tell it from a later
	// process that reused the PID; zero when unknown.
	Started time.Time
}

func (e *LockedError) Error() string {
	holder := "another writer"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
		if !e.Started.IsZero() {
			holder += " (started " + e.Started.UTC().Format(time.RFC3339) + ")"
		}
	}
	return fmt.Sprintf("%s: the pull records are locked by %s; only one writer may open them (open read-only to inspect)", e.Path, holder)
}

// Is makes errors.Is(err, ErrLocked) true for a *LockedError.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockHolder is the lock file's content.
type lockHolder struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// processStarted is when this process started: from /proc on Linux (the
// value ps shows), else when this package was initialised.
var processStarted = processStartTime()

func processStartTime() time.Time {
	if t, ok := procStartTime(); ok {
		return t
	}
	return time.Now().UTC().Truncate(time.Second)
}

// procStartTime reads the process start time from /proc/self/stat (field
// 22, clock ticks since boot) and the boot time from /proc/stat. Linux's
// user-visible clock tick (USER_HZ) is 100 on every architecture.
func procStartTime() (time.Time, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
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

// lockStore takes the store's exclusive advisory lock (flock, without
// waiting) on image_manager/.pullrecords.lock inside root, creating the
// file 0600 if needed, and records this process in it. A lock held
// elsewhere is a *LockedError. The lock lasts as long as the returned file
// is open, and dies with the process.
func lockStore(logger klog.Logger, root *os.Root, kubeletDir string) (*os.File, error) {
	name := DirName + "/" + LockFile
	path := filepath.Join(kubeletDir, DirName, LockFile)
	f, err := openLockFile(root, name, path)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			le := &LockedError{Path: path}
			if h, ok := readHolder(f); ok {
				le.PID, le.Started = h.PID, h.Started
			}
			return nil, le
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// The holder's identity is for messages only: failing to record it
	// (a full disk, say) does not stop the store from opening.
	data, _ := json.Marshal(lockHolder{PID: os.Getpid(), Started: processStarted})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(data, '\n'), 0)
		if err != nil {
			logger.Error(err, "Could not record the lock holder", "path", path)
		}
	} else {
		logger.Error(err, "Could not record the lock holder", "path", path)
	}
	return f, nil
}

// openLockFile opens the lock file for reading and writing without following
// a symbolic link: a new file is created exclusively; an existing entry must
// be a regular file with a single link (so that writing the holder into it
// cannot reach a file elsewhere), and the opened file must be that entry.
func openLockFile(root *os.Root, name, path string) (*os.File, error) {
	for range 8 {
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
		if err == nil {
			// The create mode went through the umask.
			if err := f.Chmod(filePerm); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		info, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := checkLockFile(info, path); err != nil {
			return nil, err
		}
		f, err = root.OpenFile(name, os.O_RDWR|syscall.O_NONBLOCK, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if !os.SameFile(info, fi) {
			// Replaced between the two steps.
			f.Close()
			continue
		}
		if err := checkLockFile(fi, path); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: %s keeps changing", ErrUnsafeLockFile, path)
}

func checkLockFile(info fs.FileInfo, path string) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %v", ErrUnsafeLockFile, path, info.Mode().Type())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		return fmt.Errorf("%w: %s has %d links", ErrUnsafeLockFile, path, st.Nlink)
	}
	return nil
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// readHolder reads the holder a lock file names.
func readHolder(f *os.File) (lockHolder, bool) {
	data, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 4096), 4096))
	if err != nil {
		return lockHolder{}, false
	}
	var h lockHolder
	if err := json.Unmarshal(bytes.TrimSpace(data), &h); err != nil || h.PID <= 0 {
		return lockHolder{}, false
	}
	return h, true
}
