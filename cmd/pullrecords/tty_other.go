//go:build !linux

package main

import (
	"io"
	"os"
)

// terminal reports whether w looks like a terminal (a character device) and
// its width in columns (0: unknown).
func terminal(w io.Writer) (ok bool, width int) {
	f, isFile := w.(*os.File)
	if !isFile || f == nil {
		return false, 0
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0, 0
}
