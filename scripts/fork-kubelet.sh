#!/usr/bin/env bash
# Builds the fork: kubelet v1.37.2 with kubeletadapter/hack/kuberuntime_manager.patch
# applied (the patched tree and module come from kubeletadapter/hack/fork-module.sh,
# shared with check-fork-build.sh), so that the kubelet's image pull manager
# is kubeletadapter's, built on this repository's library. Keeps it in the
# cache root of scripts/k8s-binaries.sh, as <root>/fork-<key>/kubelet, keyed
# by the hash of the tools/k8s pins, the patch, this script, fork-module.sh
# and the library source the fork compiles in (the non-test .go files,
# go.mod and go.sum of the root, cri, imagecache and kubeletadapter
# modules). Prints the path
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

key=$({
	cat "${REPO}/tools/k8s/go.mod" "${REPO}/tools/k8s/go.sum" "${REPO}/kubeletadapter/hack/kuberuntime_manager.patch" \
		"${BASH_SOURCE[0]}" "${REPO}/kubeletadapter/hack/fork-module.sh"
	# Names as well as contents: a file moved is a different library.
	library_files | while read -r f; do
		echo "${f#"${REPO}"/}"
		cat "${f}"
	done
} | sha256sum | cut -c1-16)
root="${PULLRECORDS_K8S_CACHE:-${HOME}/.cache/pullrecords-k8s}"
out="${root}/fork-${key}"
if [ -x "${out}/kubelet" ]; then
	echo "${out}/kubelet"
	exit 0
fi
mkdir -p "${root}"
# One build at a time (the same lock as k8s-binaries.sh: the two builds
# would only fight over the two cores); whoever waited finds the kubelet.
exec 9>"${root}/.lock"
flock 9
if [ -x "${out}/kubelet" ]; then
	echo "${out}/kubelet"
	exit 0
fi
tmp=$(mktemp -d "${root}/build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

start=$(date +%s)
mkdir "${tmp}/src" "${tmp}/bin"
fork_module "${tmp}/src"
pkg=k8s.io/component-base/version
ldflags="-s -w -X ${pkg}.gitVersion=${fork_k8s_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=37 -X ${pkg}.gitTreeState=clean"
(cd "${tmp}/src/m" && go build -trimpath -ldflags "${ldflags}" -o "${tmp}/bin/kubelet" k8s.io/kubernetes/cmd/kubelet)
echo "built the fork kubelet in $(($(date +%s) - start)) s" >&2
# Publish the directory at once: a reader sees the whole kubelet or none.
rm -rf "${out}"
mv "${tmp}/bin" "${out}"
# Each change of the library's source is a new key and a new 90 MB kubelet:
# keep the four newest builds (other checkouts may still use theirs) and
# remove older ones, under the lock.
ls -1dt "${root}"/fork-* 2>/dev/null | tail -n +5 | while read -r old; do rm -rf "${old}"; done
echo "${out}/kubelet"
