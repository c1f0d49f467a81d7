//go:build unix

package agent

import "golang.org/x/sys/unix"

// filesystemSize returns the total size in bytes of the filesystem holding
// path (statfs: blocks times block size). It reads only.
func filesystemSize(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Blocks) * uint64(st.Bsize), nil //nolint:gosec // Bsize is positive
}
