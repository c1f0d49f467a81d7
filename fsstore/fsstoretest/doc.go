// Package fsstoretest writes kubelet record directories for tests and
// benchmarks of code that reads them.
//
// Guarantees: the files are the bytes the kubelet writes (accessor's
// encoders), named as fsstore and the kubelet name them, under
// image_manager/pulling and image_manager/pulled with the kubelet's modes
// (0700 directories, 0600 files); a directory is written whole or the call
// returns an error.
//
// Non-guarantees: it writes with plain os.WriteFile (no temporary file, no
// fsync), so a crash mid-write leaves a partial fixture; it is not a store
// and must never be pointed at a live kubelet's directory: it starts by
// removing whatever is there.
package fsstoretest
