#!/usr/bin/env bash
# check-fork-build.sh: prove that a kubelet v1.37.2 with
# hack/kuberuntime_manager.patch applied builds against this module.
#
# The patched tree and the throwaway module a fork's go.mod would be come
# from fork-module.sh (shared with scripts/fork-kubelet.sh, which builds
# and keeps the patched kubelet); this script builds to /dev/null only.
#
# Usage: hack/check-fork-build.sh [package...]
#   default package: k8s.io/kubernetes/pkg/kubelet/kuberuntime
#   the whole kubelet: hack/check-fork-build.sh k8s.io/kubernetes/cmd/kubelet
# Slow the first time (it compiles a large part of Kubernetes).
set -euo pipefail

# shellcheck source=fork-module.sh
. "$(dirname "$0")/fork-module.sh"
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(k8s.io/kubernetes/pkg/kubelet/kuberuntime)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

fork_module "$work"
cd "$work/m"
for p in "${pkgs[@]}"; do
	go build -o /dev/null "$p"
done
echo "OK: ${pkgs[*]} builds with the patch applied."
