//go:build !unix

package agent

import "errors"

func filesystemSize(string) (uint64, error) {
	return 0, errors.New("filesystem size is only read on unix systems")
}
