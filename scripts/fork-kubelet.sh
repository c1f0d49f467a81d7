#!/usr/bin/env bash
# Builds the fork: kubelet v1.37.2 with kubeletadapter/hack/kuberuntime_manager.patch
# applied (the patched tree and module come from kubeletadapter/hack/fork-module.sh,
# shared with check-fork-build.sh), so that the kubelet's image pull manager
# is kubeletadapter's, built on this repository's library. Keeps it in the
# cache root of scripts/k8s-binaries.sh (scripts/lib/cachedbuild.sh), as
# <root>/fork-<key>/kubelet, keyed by the hash of the tools/k8s pins, the
# patch, fork-module.sh, the build commands (fork_build below), the Go
# toolchain (scripts/lib/gotoolchain.sh) and the library source the fork
# compiles in (the non-test .go files, go.mod and go.sum of the root, cri,
# imagecache and kubeletadapter modules). Prints the path
# of the kubelet. Same ldflags as k8s-binaries.sh (gitVersion v1.37.2), so
# the fork reports the version of the stock kubelet.
# About a minute with a warm go build cache; ~5 min cold on 2 cores.
#
#   PULLRECORDS_K8S_CACHE  cache root (default: ~/.cache/pullrecords-k8s)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="/usr/local/go/bin:${PATH}"
# shellcheck source=../kubeletadapter/hack/fork-module.sh
. "${REPO}/kubeletadapter/hack/fork-module.sh"
. "${REPO}/scripts/lib/cachedbuild.sh"
. "${REPO}/scripts/lib/gotoolchain.sh"

# The library files, in a stable order: the packages of each module the
# fork compiles in (its directories, pruning nested modules, each of which
# has a go.mod, and testdata): the root, cri, imagecache and kubeletadapter.
library_files() {
	local mod
	for mod in "${REPO}" "${REPO}/cri" "${REPO}/imagecache" "${REPO}/kubeletadapter"; do
		(cd "${mod}" && find . \( -path ./.git -o -name testdata -o \( -type d ! -name . -exec test -e '{}/go.mod' \; \) \) -prune \
			-o -type f \( \( -name '*.go' ! -name '*_test.go' \) -o -name go.mod -o -name go.sum \) -print |
			LC_ALL=C sort | sed "s|^\.|${mod}|")
	done
}

# fork_build ENTRY SCRATCH builds the fork's kubelet into ENTRY, from the
# patched tree fork_module prepares in SCRATCH.
fork_build() {
	local entry=$1 scratch=$2 pkg=k8s.io/component-base/version ldflags start
	export GOWORK=off GOFLAGS=-mod=mod
	start=$(date +%s)
	fork_module "${scratch}"
	ldflags="-s -w -X ${pkg}.gitVersion=${fork_k8s_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=37 -X ${pkg}.gitTreeState=clean"
	cd "${scratch}/m"
	go build -trimpath -ldflags "${ldflags}" -o "${entry}/kubelet" k8s.io/kubernetes/cmd/kubelet
	echo "built the fork kubelet in $(($(date +%s) - start)) s" >&2
}

# fork_evict ENTRY: each change of the library's source is a new key and a
# new 90 MB kubelet: keep the four newest builds (other checkouts may still
# use theirs) and remove older ones (cachedbuild runs it under the lock).
fork_evict() {
	ls -1dt "$(cachedbuild_root)"/fork-* 2>/dev/null | tail -n +5 | while read -r old; do rm -rf "${old}"; done
}

key=$({
	cat "${REPO}/tools/k8s/go.mod" "${REPO}/tools/k8s/go.sum" "${REPO}/kubeletadapter/hack/kuberuntime_manager.patch" \
		"${REPO}/kubeletadapter/hack/fork-module.sh"
	declare -f fork_build
	echo "${fork_k8s_version}"
	gotoolchain_id "${REPO}/tools/k8s"
	# Names as well as contents: a file moved is a different library.
	library_files | while read -r f; do
		echo "${f#"${REPO}"/}"
		cat "${f}"
	done
} | sha256sum | cut -c1-16)
# One build at a time (the same lock as k8s-binaries.sh: the two builds
# would only fight over the two cores); whoever waited finds the kubelet.
cachedbuild --after fork_evict --print kubelet fork "${key}" fork_build kubelet
