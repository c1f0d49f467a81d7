# gotoolchain.sh: sourced by the scripts that key a Go build's cache entry
# (scripts/k8s-binaries.sh, scripts/fork-kubelet.sh, scripts/helm.sh).
#
# gotoolchain_id DIR prints, one a line, the settings of the Go toolchain a
# build run from DIR would use that change the programs it writes: the Go
# version (after GOTOOLCHAIN's choice for DIR's go.mod), the target OS and
# architecture with its level, and whether cgo is on. A cache key that
# includes them changes when the toolchain or the target does; paths such
# as GOCACHE or GOMODCACHE are left out, since they change no program.
gotoolchain_id() {
	(cd "$1" && GOWORK=off GOFLAGS= go env GOVERSION GOOS GOARCH GOAMD64 GOARM64 CGO_ENABLED)
}
