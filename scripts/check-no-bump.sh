#!/usr/bin/env bash
# check-no-bump.sh: importing this library into a kubelet build must not
# change any module version k8s.io/kubernetes v1.37.2 selects, nor the go
# line.
#
# It makes a throwaway module requiring k8s.io/kubernetes v1.37.2 with the
# staging replaces, first importing only the kubelet's pull manager package
# (the baseline), then also every package a kubelet fork may compile in:
# accessor, credstamp, crishim, fsstore, imageruntime, memstore,
# originverify, pullmanager and recordsdir of the root module, imagecache
# of the imagecache module, and cri, cri/criproxy and cri/critest of the cri
# module (each module replaced by its directory in this repository, as
# kubeletadapter's go.mod replaces them). It fails, printing the
# differences, if a module present in both lists has another version or
# the go line differs; modules the library adds are listed, not failed.
#
# Usage: scripts/check-no-bump.sh   (network or a warm module cache;
#        PULLRECORDS_REPO=dir checks another checkout)
set -euo pipefail

repo=${PULLRECORDS_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
k8s_version=v1.37.2
staging_version=v0.37.2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

k8s_gomod=$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -n "$k8s_gomod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@$k8s_version" >&2; exit 2; }

cd "$work"
{
	echo "module example.com/checknobump"
	echo
	echo "go $(sed -n 's/^go //p' "$k8s_gomod")"
	echo
	echo "require k8s.io/kubernetes $k8s_version"
	echo
	echo "replace ("
	# Every staging module k8s.io/kubernetes replaces with ./staging/...,
	# pinned to the matching published version; sample-cli-plugin and
	# sample-controller have no published v0.37.2.
	sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/[a-z0-9-]*$#\1#p' "$k8s_gomod" |
		grep -v -e '^k8s.io/sample-cli-plugin$' -e '^k8s.io/sample-controller$' |
		while read -r m; do echo "	$m => $m $staging_version"; done
	echo ")"
} >go.mod

cat >base.go <<'GO'
package checknobump

import _ "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"
GO

go mod tidy >/dev/null
go list -m all | sort >"$work/base.txt"
base_go=$(sed -n 's/^go //p' go.mod)

cat >lib.go <<'GO'
package checknobump

import (
	_ "github.com/pullrecords/pullrecords/accessor"
	_ "github.com/pullrecords/pullrecords/credstamp"
	_ "github.com/pullrecords/pullrecords/crishim"
	_ "github.com/pullrecords/pullrecords/fsstore"
	_ "github.com/pullrecords/pullrecords/imageruntime"
	_ "github.com/pullrecords/pullrecords/memstore"
	_ "github.com/pullrecords/pullrecords/originverify"
	_ "github.com/pullrecords/pullrecords/pullmanager"
	_ "github.com/pullrecords/pullrecords/recordsdir"

	_ "github.com/pullrecords/pullrecords/imagecache"

	_ "github.com/pullrecords/pullrecords/cri"
	_ "github.com/pullrecords/pullrecords/cri/criproxy"
	_ "github.com/pullrecords/pullrecords/cri/critest"
)
GO
# The modules of this repository the lines above import, each at the zero
# pseudo-version and replaced by its directory.
lib_modules=(github.com/pullrecords/pullrecords=. github.com/pullrecords/pullrecords/imagecache=imagecache
	github.com/pullrecords/pullrecords/cri=cri)
for m in "${lib_modules[@]}"; do
	go mod edit -require="${m%%=*}@v0.0.0-00010101000000-000000000000" -replace="${m%%=*}=$repo/${m#*=}"
done
go mod tidy >/dev/null
go list -m all | sort >"$work/with.txt"
with_go=$(sed -n 's/^go //p' go.mod)

# "path version" per line; the main module and the library itself have no
# comparable version.
status=0
declare -A before
while read -r path version _; do
	before[$path]=$version
done <"$work/base.txt"
added=()
while read -r path version _; do
	case $path in example.com/checknobump | github.com/pullrecords/pullrecords | github.com/pullrecords/pullrecords/*) continue ;; esac
	if [ -z "${before[$path]+x}" ]; then
		added+=("$path $version")
	elif [ "${before[$path]}" != "$version" ]; then
		echo "BUMPED: $path ${before[$path]} -> $version"
		status=1
	fi
done <"$work/with.txt"
if [ "$base_go" != "$with_go" ]; then
	echo "BUMPED: go line $base_go -> $with_go"
	status=1
fi
if [ ${#added[@]} -gt 0 ]; then
	echo "Modules the library adds (not in the kubelet's graph for this package):"
	printf '  %s\n' "${added[@]}"
fi
if [ $status -eq 0 ]; then
	echo "OK: no module version and no go line changed ($(wc -l <"$work/base.txt") modules in the baseline)."
fi
exit $status
