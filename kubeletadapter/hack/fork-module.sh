# fork-module.sh: sourced by check-fork-build.sh and scripts/fork-kubelet.sh,
# the one place that turns k8s.io/kubernetes v1.37.2 into the fork.
#
# fork_module WORK prepares, under the empty directory WORK:
#   WORK/kubernetes  a copy of k8s.io/kubernetes v1.37.2 from the module
#                    cache (hard links; go build -overlay refuses files in
#                    the module cache) with hack/kuberuntime_manager.patch
#                    applied (the one patched file gets an inode of its own);
#   WORK/m           a throwaway module that replaces k8s.io/kubernetes with
#                    the copy and requires kubeletadapter (and, through the
#                    replaces of kubeletadapter's go.mod, this repository's
#                    root, cri and imagecache modules and the staging
#                    modules), as a fork's own go.mod would; "go mod tidy"
#                    has run in it.
# It leaves the current directory and GOWORK/GOFLAGS as it found them only
# in a subshell; callers run it with GOWORK=off GOFLAGS=-mod=mod exported.

# fork_adapter_dir is kubeletadapter/ (this file is in kubeletadapter/hack).
fork_adapter_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fork_repo_dir=$(cd "${fork_adapter_dir}/.." && pwd)
fork_k8s_version=v1.37.2

fork_module() {
	local work=$1 k8s_dir file
	k8s_dir=$(go mod download -json "k8s.io/kubernetes@${fork_k8s_version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "${k8s_dir}" ] || { echo "fork_module: k8s.io/kubernetes@${fork_k8s_version} not in the module cache" >&2; return 1; }
	cp -al "${k8s_dir}" "${work}/kubernetes"
	# Only the new directories become writable: the files stay hard links
	# to the module cache's.
	find "${work}/kubernetes" -type d -exec chmod u+w {} +
	file=${work}/kubernetes/pkg/kubelet/kuberuntime/kuberuntime_manager.go
	cp --remove-destination "${k8s_dir}/pkg/kubelet/kuberuntime/kuberuntime_manager.go" "${file}"
	chmod u+w "${file}"
	(cd "${work}/kubernetes" && patch -p1 --quiet <"${fork_adapter_dir}/hack/kuberuntime_manager.patch")

	mkdir "${work}/m"
	{
		echo "module example.com/forkcheck"
		echo
		echo "go 1.26.0"
		echo
		echo "require ("
		echo "	k8s.io/kubernetes ${fork_k8s_version}"
		echo "	github.com/pullrecords/pullrecords/kubeletadapter v0.0.0-00010101000000-000000000000"
		echo ")"
		echo
		echo "replace github.com/pullrecords/pullrecords/kubeletadapter => ${fork_adapter_dir}"
		echo
		# Every module of this repository kubeletadapter's go.mod replaces
		# with a relative path (the root, cri, imagecache), made absolute.
		sed -n 's#^replace \(github\.com/pullrecords/pullrecords[a-z/]*\) => \.\./\(.*\)$#replace \1 => '"${fork_repo_dir}"'/\2#p' "${fork_adapter_dir}/go.mod"
		echo
		echo "replace k8s.io/kubernetes => ${work}/kubernetes"
		echo
		sed -n '/^replace (/,/^)/p' "${fork_adapter_dir}/go.mod"
	} >"${work}/m/go.mod"
	cat >"${work}/m/deps.go" <<'GO'
package forkcheck

import (
	_ "github.com/pullrecords/pullrecords/kubeletadapter"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
	_ "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
)
GO
	(cd "${work}/m" && go mod tidy >/dev/null)
}
