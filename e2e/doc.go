//go:build e2e

// Package e2e runs cri and imagecache against a real containerd and two real
// registries (one with htpasswd auth, one open) that e2e/run.sh starts on
// 127.0.0.1. It only builds with the e2e build tag, and its tests fail, not
// skip, when the environment run.sh provides is missing.
package e2e
