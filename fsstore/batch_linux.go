package fsstore

import (
	"io/fs"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// The Linux rootDir reads a whole directory through the directory's own
// descriptor: getdents64 gives every entry's type with its name (an os.File
// opened inside an os.Root would lstat each entry), and a file known to be
// regular is read with openat, fstat, read and close on raw descriptors,
// without an os.File (whose creation also tries to register the descriptor
// with the poller) and without the lstat before the open. Names are single
// path components straight from the directory listing and the open uses
// O_NOFOLLOW, so nothing outside the directory and no symbolic link can be
// reached; anything unusual goes back to the careful path (dir.readFile).

var _ batchReader = (*rootDir)(nil)

func (d *rootDir) readDirTyped() ([]typedEntry, error) {
	f, err := d.OSRoot().Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var out []typedEntry
	var readErr error
	err = rc.Control(func(fd uintptr) {
		buf := make([]byte, 64<<10)
		for {
			n, err := syscall.ReadDirent(int(fd), buf)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				readErr = &fs.PathError{Op: "readdirent", Path: d.Name(), Err: err}
				return
			}
			if n <= 0 {
				return
			}
			out = parseDirents(buf[:n], out)
		}
	})
	if err == nil {
		err = readErr
	}
	return out, err
}

var (
	direntReclen = unsafe.Offsetof(syscall.Dirent{}.Reclen)
	direntType   = unsafe.Offsetof(syscall.Dirent{}.Type)
	direntName   = unsafe.Offsetof(syscall.Dirent{}.Name)
)

// parseDirents appends the entries of a getdents64 buffer to out, leaving out
// "." and "..".
func parseDirents(buf []byte, out []typedEntry) []typedEntry {
	for len(buf) > int(direntName) {
		reclen := int(*(*uint16)(unsafe.Pointer(&buf[direntReclen])))
		if reclen <= int(direntName) || reclen > len(buf) {
			break
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		name := rec[direntName:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		out = append(out, typedEntry{name: string(name), typ: direntMode(rec[direntType])})
	}
	return out
}

func direntMode(t byte) fs.FileMode {
	switch t {
	case syscall.DT_REG:
		return 0
	case syscall.DT_DIR:
		return fs.ModeDir
	case syscall.DT_LNK:
		return fs.ModeSymlink
	case syscall.DT_FIFO:
		return fs.ModeNamedPipe
	case syscall.DT_SOCK:
		return fs.ModeSocket
	case syscall.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.DT_BLK:
		return fs.ModeDevice
	default:
		return modeUnknown
	}
}

func (d *rootDir) openBatch() (batch, error) {
	f, err := d.OSRoot().Open(".")
	if err != nil {
		return nil, err
	}
	return &rawBatch{dir: f, fd: int(f.Fd())}, nil
}

// rawBatch reads files of one directory through its descriptor. Its read
// method is safe for concurrent use.
type rawBatch struct {
	dir *os.File
	fd  int
}

func (b *rawBatch) close() error { return b.dir.Close() }

// read returns the content of name in buf (grown as needed) when name is a
// regular file of at most maxFileSize bytes that could be read whole. ok is
// false for anything else, the caller then takes the careful path.
func (b *rawBatch) read(name string, buf []byte) (data []byte, ok bool) {
	data, _, ok = b.readStat(name, buf)
	return data, ok
}

// readStat is read, also returning what fstat said of the file read.
func (b *rawBatch) readStat(name string, buf []byte) (data []byte, st fileStat, ok bool) {
	// NUL-terminated name on the stack for names of the store's length.
	var pathBuf [128]byte
	if len(name) >= len(pathBuf) {
		return buf, st, false
	}
	copy(pathBuf[:], name)
	var fd int
	for {
		r, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(b.fd), uintptr(unsafe.Pointer(&pathBuf[0])),
			uintptr(syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return buf, st, false
		}
		fd = int(r)
		break
	}
	defer syscall.Close(fd)
	var sys syscall.Stat_t
	if err := syscall.Fstat(fd, &sys); err != nil || sys.Mode&syscall.S_IFMT != syscall.S_IFREG || sys.Size > maxFileSize {
		return buf, st, false
	}
	st = fileStat{perm: fs.FileMode(sys.Mode).Perm(), uid: sys.Uid}
	size := int(sys.Size)
	if cap(buf) < size+1 {
		buf = make([]byte, size+1, max(size+1, 2*cap(buf)))
	}
	buf = buf[:cap(buf)]
	n := 0
	for n < size+1 {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf, st, false
		}
		if m == 0 {
			break
		}
		n += m
		if n == size {
			// Files are replaced by rename, never appended to: the
			// size fstat gave is the whole file.
			break
		}
	}
	if n != size {
		return buf, st, false
	}
	runtime.KeepAlive(b.dir)
	return buf[:n], st, true
}
