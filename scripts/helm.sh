#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, the version below) through the Go module
# proxy and keeps it in the cache root of scripts/k8s-binaries.sh, as
# <root>/helm-<version>/helm, so that only the first run pays for the build
# (~3 min cold on 2 cores). Prints the path of the helm program. The chart's
# test (deploy/helm/pullrecords, cluster/helmchart) finds it through
# $PULLRECORDS_HELM, which .ci/run sets from this script's output.
#
#   PULLRECORDS_K8S_CACHE  cache root (default: ~/.cache/pullrecords-k8s)
set -euo pipefail
export PATH="/usr/local/go/bin:${PATH}"
version=v3.22.0
root="${PULLRECORDS_K8S_CACHE:-${HOME}/.cache/pullrecords-k8s}"
out="${root}/helm-${version}"
if [ -x "${out}/helm" ]; then
	echo "${out}/helm"
	exit 0
fi
mkdir -p "${root}"
# One build at a time (the lock of k8s-binaries.sh and fork-kubelet.sh: the
# builds would only fight over the two cores); whoever waited finds helm.
exec 9>"${root}/.lock"
flock 9
if [ -x "${out}/helm" ]; then
	echo "${out}/helm"
	exit 0
fi
tmp=$(mktemp -d "${root}/build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT
start=$(date +%s)
# Outside any module or workspace of this repository: "go install pkg@version"
# builds with helm's own go.mod. Helm prints the version given here.
(cd "${tmp}" && GOWORK=off GOFLAGS= GOBIN="${tmp}" go install -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${version}" \
	"helm.sh/helm/v3/cmd/helm@${version}")
echo "built helm ${version} in $(($(date +%s) - start)) s" >&2
"${tmp}/helm" version --short >&2
# Publish it whole: a reader sees a finished helm or none.
rm -rf "${out}"
mv "${tmp}" "${out}"
trap - EXIT
echo "${out}/helm"
