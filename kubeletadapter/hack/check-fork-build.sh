#!/usr/bin/env bash
# check-fork-build.sh: prove that a kubelet v1.37.2 with
# hack/kuberuntime_manager.patch applied builds against this module.
#
# It copies k8s.io/kubernetes v1.37.2 from the module cache (hard links;
# go build -overlay refuses files in the module cache), applies the patch to
# the copy, and builds in a throwaway module that replaces k8s.io/kubernetes
# with the copy and requires this module (plus the staging replaces of this
# module's go.mod), as a fork's own go.mod would.
#
# Usage: hack/check-fork-build.sh [package...]
#   default package: k8s.io/kubernetes/pkg/kubelet/kuberuntime
#   the whole kubelet: hack/check-fork-build.sh k8s.io/kubernetes/cmd/kubelet
# Slow the first time (it compiles a large part of Kubernetes).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/.." && pwd)
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(k8s.io/kubernetes/pkg/kubelet/kuberuntime)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

k8s_dir=$(go mod download -json k8s.io/kubernetes@v1.37.2 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp -al "$k8s_dir" "$work/kubernetes"
# Only the new directories become writable: the files are hard links to
# the module cache's, and the one patched file gets an inode of its own.
find "$work/kubernetes" -type d -exec chmod u+w {} +
file=$work/kubernetes/pkg/kubelet/kuberuntime/kuberuntime_manager.go
cp --remove-destination "$k8s_dir/pkg/kubelet/kuberuntime/kuberuntime_manager.go" "$file"
chmod u+w "$file"
(cd "$work/kubernetes" && patch -p1 --quiet <"$here/hack/kuberuntime_manager.patch")

mkdir "$work/m"
cd "$work/m"
{
	echo "module example.com/forkcheck"
	echo
	echo "go 1.26.0"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes v1.37.2"
	echo "	github.com/pullrecords/pullrecords/kubeletadapter v0.0.0-00010101000000-000000000000"
	echo ")"
	echo
	echo "replace github.com/pullrecords/pullrecords/kubeletadapter => $here"
	echo
	echo "replace github.com/pullrecords/pullrecords => $repo"
	echo
	echo "replace k8s.io/kubernetes => $work/kubernetes"
	echo
	sed -n '/^replace (/,/^)/p' "$here/go.mod"
} >go.mod
cat >deps.go <<'GO'
package forkcheck

import (
	_ "github.com/pullrecords/pullrecords/kubeletadapter"
	_ "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
)
GO
go mod tidy >/dev/null
for p in "${pkgs[@]}"; do
	go build -o /dev/null "$p"
done
echo "OK: ${pkgs[*]} builds with the patch applied."
