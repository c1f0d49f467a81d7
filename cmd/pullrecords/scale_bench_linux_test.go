package main

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/pullrecords/pullrecords/fsstore"
)

// readOnceRaw is readOnce with the fewest system calls a careful reader
// needs per file (openat on the directory's descriptor, fstat, read, close;
// no os.File), the floor under fsstore's own reads.
func readOnceRaw(dir string, workers int) (int, error) {
	var total atomic.Int64
	for _, sub := range []string{fsstore.IntentsDir, fsstore.RecordsDir} {
		d, err := os.Open(filepath.Join(dir, fsstore.DirName, sub))
		if err != nil {
			return 0, err
		}
		names, err := d.Readdirnames(-1)
		if err != nil {
			d.Close()
			return 0, err
		}
		fd := int(d.Fd())
		var next atomic.Int64
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					i := int(next.Add(1)) - 1
					if i >= len(names) || errs[w] != nil {
						return
					}
					f, err := syscall.Openat(fd, names[i], syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
					if err != nil {
						errs[w] = err
						return
					}
					var st syscall.Stat_t
					if err := syscall.Fstat(f, &st); err != nil {
						errs[w] = err
					} else if n, err := syscall.Read(f, buf[:min(int(st.Size), len(buf))]); err != nil {
						errs[w] = err
					} else {
						total.Add(int64(n))
					}
					syscall.Close(f)
				}
			})
		}
		wg.Wait()
		d.Close()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
	}
	return int(total.Load()), nil
}
