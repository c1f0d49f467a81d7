#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, the version below) through the Go module
# proxy and keeps it in the cache root of scripts/k8s-binaries.sh, as
# <root>/helm-<version>-<key>/helm (scripts/lib/cachedbuild.sh; key: the
# hash of the version, the build commands, helm_build below, and the Go
# toolchain, scripts/lib/gotoolchain.sh), so that only
# the first run pays for the build (~1 min on 2 cores with the modules
# downloaded). Prints the path of the helm program. The chart's
# test (deploy/helm/pullrecords, cluster/helmchart) finds it through
# $PULLRECORDS_HELM, which .ci/run sets from this script's output.
#
#   PULLRECORDS_K8S_CACHE  cache root (default: ~/.cache/pullrecords-k8s)
set -euo pipefail
export PATH="/usr/local/go/bin:${PATH}"
version=v3.22.0
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "${REPO}/scripts/lib/cachedbuild.sh"
. "${REPO}/scripts/lib/gotoolchain.sh"

# helm_build ENTRY SCRATCH builds helm ${version} into ENTRY.
helm_build() {
	local entry=$1 scratch=$2 start
	start=$(date +%s)
	# Outside any module or workspace of this repository: "go install
	# pkg@version" builds with helm's own go.mod. The flags are those of
	# helm's Makefile: the version, and the Kubernetes version "helm
	# template" assumes (that of helm's client-go, v0.37; otherwise v1.20,
	# which fails the chart's kubeVersion).
	cd "${scratch}"
	GOWORK=off GOFLAGS= GOBIN="${entry}" go install -trimpath \
		-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${version} \
			-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 \
			-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" \
		"helm.sh/helm/v3/cmd/helm@${version}"
	echo "built helm ${version} in $(($(date +%s) - start)) s" >&2
	"${entry}/helm" version --short >&2
}

key=$({
	echo "${version}"
	declare -f helm_build
	gotoolchain_id /
} | sha256sum | cut -c1-8)
# One build at a time (the lock of k8s-binaries.sh and fork-kubelet.sh: the
# builds would only fight over the two cores); whoever waited finds helm.
cachedbuild --print helm "helm-${version}" "${key}" helm_build helm
