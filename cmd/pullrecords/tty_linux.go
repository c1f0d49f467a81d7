//go:build linux

package main

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// terminal reports whether w is a terminal (a tcgetattr that succeeds, not
// merely a character device such as /dev/null) and its width in columns (0
// if unknown).
func terminal(w io.Writer) (ok bool, width int) {
	f, isFile := w.(*os.File)
	if !isFile || f == nil {
		return false, 0
	}
	fd := f.Fd()
	var t syscall.Termios
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&t))); errno != 0 {
		return false, 0
	}
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); errno == 0 {
		width = int(ws.Col)
	}
	return true, width
}
