#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubelet from the Go modules pinned in
# tools/k8s (k8s.io/kubernetes v1.37.2, go.etcd.io/etcd/server/v3 v3.7.0) and
# keeps them in a cache directory outside the repository, keyed by the pin
# file's hash, so that only the first run pays for the build (~10 min cold on
# 2 cores). Prints the directory holding the three programs. With --check
# it builds nothing: it prints the directory if the programs are built, else
# says how to build them and exits 3 (tests use that, so a missing build
# fails at once instead of running for ten minutes inside go test).
#
#   PULLRECORDS_K8S_CACHE  cache root (default: ~/.cache/pullrecords-k8s)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${REPO}/tools/k8s"
export PATH="/usr/local/go/bin:${PATH}"
export GOWORK=off GOFLAGS=-mod=readonly

key=$(cat "${TOOLS}/go.mod" "${TOOLS}/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
root="${PULLRECORDS_K8S_CACHE:-${HOME}/.cache/pullrecords-k8s}"
out="${root}/${key}"
if [ -x "${out}/kube-apiserver" ] && [ -x "${out}/etcd" ] && [ -x "${out}/kubelet" ]; then
	echo "${out}"
	exit 0
fi
if [ "${1:-}" = --check ]; then
	echo "kube-apiserver, etcd and kubelet v1.37.2 are not built in ${out}; build them with: bash scripts/k8s-binaries.sh (about 10 minutes on 2 cores), or set PULLRECORDS_K8S_BIN" >&2
	exit 3
fi
mkdir -p "${root}"
# One build at a time (test binaries of several packages may ask at once);
# whoever waited finds the finished set.
exec 9>"${root}/.lock"
flock 9
if [ -x "${out}/kube-apiserver" ] && [ -x "${out}/etcd" ] && [ -x "${out}/kubelet" ]; then
	echo "${out}"
	exit 0
fi
tmp=$(mktemp -d "${root}/build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

ver=v1.37.2
pkg=k8s.io/component-base/version
ldflags="-s -w -X ${pkg}.gitVersion=${ver} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=37 -X ${pkg}.gitTreeState=clean"
cd "${TOOLS}"
for prog in k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet go.etcd.io/etcd/server/v3; do
	name=$(basename "${prog}")
	[ "${name}" = v3 ] && name=etcd
	start=$(date +%s)
	go build -trimpath -ldflags "${ldflags}" -o "${tmp}/${name}" "${prog}"
	echo "built ${name} in $(($(date +%s) - start)) s" >&2
done
# Publish the whole set at once: a reader sees all three programs or none.
rm -rf "${out}"
mv "${tmp}" "${out}"
trap - EXIT
echo "${out}"
