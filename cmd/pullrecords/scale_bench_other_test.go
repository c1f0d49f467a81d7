//go:build !linux

package main

// readOnceRaw falls back to readOnce where the raw reader is not written.
func readOnceRaw(dir string, workers int) (int, error) { return readOnce(dir, workers) }
