//go:build !linux

package fsstore

import "os"

// exchange and link are implemented on Linux only; elsewhere Repair keeps an
// unreadable entry as it is rather than leave its name absent for a moment.
func exchange(*os.File, string, string) error { return errExchangeUnsupported }

func link(*os.File, string, string) error { return errCannotSwap }
