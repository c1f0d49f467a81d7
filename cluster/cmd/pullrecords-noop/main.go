// Command pullrecords-noop is what pre-pull pods run. Built static
// (CGO_ENABLED=0), it needs nothing from the image it runs in, so an image
// without a shell or any binary can be cached.
//
//	pullrecords-noop install DEST   copy this program to DEST (mode 0555)
//	pullrecords-noop                exit 0 at once
//
// The init container of a pre-pull pod runs "install" from this project's
// image into an emptyDir; the pre-pull container then runs the copy from
// there inside the image being cached.
package main

import (
	"io"
	"os"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "install" {
		if err := install(os.Args[2]); err != nil {
			os.Stderr.WriteString("pullrecords-noop: " + err.Error() + "\n")
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 {
		os.Stderr.WriteString("usage: pullrecords-noop [install DEST]\n")
		os.Exit(2)
	}
}

func install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dest + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}
