#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, the version below) through the Go module
# proxy and keeps it in the cache root of scripts/k8s-binaries.sh, as
# <root>/helm-<version>-<key>/helm (key: this script's hash), so that only
# the first run pays for the build (~1 min on 2 cores with the modules
# downloaded). Prints the path of the helm program. The chart's
# test (deploy/helm/pullrecords, cluster/helmchart) finds it through
# $PULLRECORDS_HELM, which .ci/run sets from this script's output.
#
#   PULLRECORDS_K8S_CACHE  cache root (default: ~/.cache/pullrecords-k8s)
set -euo pipefail
export PATH="/usr/local/go/bin:${PATH}"
version=v3.22.0
root="${PULLRECORDS_K8S_CACHE:-${HOME}/.cache/pullrecords-k8s}"
key=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-8)
out="${root}/helm-${version}-${key}"
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
# builds with helm's own go.mod. The flags are those of helm's Makefile:
# the version, and the Kubernetes version "helm template" assumes (that of
# helm's client-go, v0.37; otherwise v1.20, which fails the chart's
# kubeVersion).
(cd "${tmp}" && GOWORK=off GOFLAGS= GOBIN="${tmp}" go install -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${version} \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" \
	"helm.sh/helm/v3/cmd/helm@${version}")
echo "built helm ${version} in $(($(date +%s) - start)) s" >&2
"${tmp}/helm" version --short >&2
# Publish it whole: a reader sees a finished helm or none.
rm -rf "${out}"
mv "${tmp}" "${out}"
trap - EXIT
echo "${out}/helm"
