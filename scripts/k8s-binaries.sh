#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubelet from the Go modules pinned in
# tools/k8s (k8s.io/kubernetes v1.37.2, go.etcd.io/etcd/server/v3 v3.7.0) and
# keeps them in a cache directory outside the repository (scripts/lib/cachedbuild.sh),
# so that only the first run pays for the build (~10 min cold on 2 cores).
# Prints the directory holding the three programs. With --check it builds
# nothing: it prints the directory if the programs are built, else says how
# to build them and exits 3 (tests use that, so a missing build fails at
# once instead of running for ten minutes inside go test).
#
# The key is the hash of what the programs are made of: the pins
# (tools/k8s/go.mod and go.sum), the build commands (k8s_build below, as
# bash prints it) and the Go toolchain (scripts/lib/gotoolchain.sh); not the
# rest of this file, so that editing a comment or a message costs no
# ten-minute build.
#
#   PULLRECORDS_K8S_CACHE  cache root (default: ~/.cache/pullrecords-k8s)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${REPO}/tools/k8s"
export PATH="/usr/local/go/bin:${PATH}"
. "${REPO}/scripts/lib/cachedbuild.sh"
. "${REPO}/scripts/lib/gotoolchain.sh"

# k8s_build ENTRY SCRATCH builds the three programs into ENTRY.
k8s_build() {
	local entry=$1 ver=v1.37.2 pkg=k8s.io/component-base/version ldflags prog name start
	export GOWORK=off GOFLAGS=-mod=readonly
	ldflags="-s -w -X ${pkg}.gitVersion=${ver} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=37 -X ${pkg}.gitTreeState=clean"
	cd "${TOOLS}"
	for prog in k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet go.etcd.io/etcd/server/v3; do
		name=$(basename "${prog}")
		[ "${name}" = v3 ] && name=etcd
		start=$(date +%s)
		go build -trimpath -ldflags "${ldflags}" -o "${entry}/${name}" "${prog}"
		echo "built ${name} in $(($(date +%s) - start)) s" >&2
	done
}

key=$({
	cat "${TOOLS}/go.mod" "${TOOLS}/go.sum"
	declare -f k8s_build
	gotoolchain_id "${TOOLS}"
} | sha256sum | cut -c1-16)
check=()
if [ "${1:-}" = --check ]; then
	check=(--check "kube-apiserver, etcd and kubelet v1.37.2 are not built in $(cachedbuild_dir "" "${key}"); build them with: bash scripts/k8s-binaries.sh (about 10 minutes on 2 cores), or set PULLRECORDS_K8S_BIN")
fi
# One build at a time (test binaries of several packages may ask at once);
# whoever waited finds the finished set.
cachedbuild "${check[@]}" "" "${key}" k8s_build kube-apiserver etcd kubelet
