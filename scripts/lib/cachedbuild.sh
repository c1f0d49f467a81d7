# cachedbuild.sh: sourced by scripts/k8s-binaries.sh, scripts/fork-kubelet.sh
# and scripts/helm.sh, the one place that keeps a build in a cache directory
# keyed by the build's inputs.
#
# The cache root is ${PULLRECORDS_K8S_CACHE:-~/.cache/pullrecords-k8s}. An
# entry is the directory <root>/<name>-<key> (<root>/<key> when the name is
# empty); it is complete when each of its listed files is an executable
# file. Callers compute the key: it must change whenever the build's output
# could, and only then.
#
#   cachedbuild [--check MESSAGE] [--after FUNC] [--print FILE] NAME KEY BUILD FILE...
#
# prints the entry's path (or, with --print, the path of FILE inside it) as
# its last line of standard output, building the entry first if it is not
# complete:
#   1. complete: print, done (no lock, nothing written);
#   2. with --check: print MESSAGE on standard error and return 3, having
#      written nothing (not even the root);
#   3. take the lock <root>/.lock (flock; shared with every script using
#      this file, and with their older copies of the same mechanism), and
#      look again: whoever waited for a build of the same key finds it done;
#   4. remove what killed builds left (<root>/build.* : under the lock no
#      build is running), make <root>/build.XXXXXX and run, in a subshell,
#      BUILD ENTRY SCRATCH with ENTRY (<tmp>/entry, empty) to fill with the
#      entry's files and SCRATCH (<tmp>/scratch, empty) for anything else;
#   5. check that BUILD made every FILE executable, replace the entry by
#      ENTRY with one rename, run FUNC ENTRYPATH if --after gave it (still
#      under the lock), remove <tmp>, print.
#
# Guarantees:
#   - a reader that checks completeness (as step 1 does) sees a whole build
#     or none: the entry appears by one rename of a finished directory;
#   - one build at a time per cache root: two calls for the same key build
#     once, and builds of different keys wait for each other (they would
#     only fight over the cores);
#   - a failed build (BUILD fails, or leaves a FILE missing) leaves no entry
#     and no temp directory, and the call fails.
# It does not:
#   - evict entries of old keys (a caller may, in its --after FUNC);
#   - limit the time a build holds the lock, or notice a lock held by a
#     build's leftover child process;
#   - check an entry's content beyond its files being executable.
#
# Requirements: the caller runs with "set -euo pipefail" and calls
# cachedbuild as a plain command (not under if, !, && or ||, where bash
# ignores set -e inside functions and subshells; cachedbuild refuses to run
# without set -e, and the FILE check of step 5 catches a build that went on
# after a failure). It sets an EXIT trap while it builds (removing <tmp>)
# and clears it afterwards, so the caller must not rely on its own EXIT
# trap across the call. BUILD runs in a subshell: its cd, variables and
# traps do not leak into the caller.

# cachedbuild_root prints the cache root.
cachedbuild_root() {
	echo "${PULLRECORDS_K8S_CACHE:-${HOME}/.cache/pullrecords-k8s}"
}

# cachedbuild_dir NAME KEY prints the entry's directory.
cachedbuild_dir() {
	echo "$(cachedbuild_root)/${1:+${1}-}${2}"
}

# cachedbuild_complete DIR FILE... succeeds when each FILE is an executable
# file in DIR.
cachedbuild_complete() {
	local dir=$1 f
	shift
	for f in "$@"; do
		[ -f "${dir}/${f}" ] && [ -x "${dir}/${f}" ] || return 1
	done
}

cachedbuild() {
	local check='' check_set=0 after='' print=''
	while [ $# -gt 0 ]; do
		case $1 in
		--check) check=$2 check_set=1; shift 2 ;;
		--after) after=$2; shift 2 ;;
		--print) print=$2; shift 2 ;;
		--*) echo "cachedbuild: unknown option $1" >&2; return 2 ;;
		*) break ;;
		esac
	done
	if [ $# -lt 4 ]; then
		echo "cachedbuild: usage: cachedbuild [--check MESSAGE] [--after FUNC] [--print FILE] NAME KEY BUILD FILE..." >&2
		return 2
	fi
	case $- in
	*e*) ;;
	*) echo "cachedbuild: the caller must run with set -e" >&2; return 2 ;;
	esac
	local name=$1 key=$2 build=$3
	shift 3
	if [ -z "${key}" ] || [[ ${key} == */* ]] || [[ ${name} == */* ]]; then
		echo "cachedbuild: bad name or key: '${name}' '${key}'" >&2
		return 2
	fi
	local root out shown
	root=$(cachedbuild_root)
	out=$(cachedbuild_dir "${name}" "${key}")
	shown=${out}${print:+/${print}}
	if cachedbuild_complete "${out}" "$@"; then
		echo "${shown}"
		return 0
	fi
	if [ "${check_set}" = 1 ]; then
		echo "${check}" >&2
		return 3
	fi

	mkdir -p "${root}"
	local lockfd
	exec {lockfd}>"${root}/.lock"
	flock "${lockfd}"
	if cachedbuild_complete "${out}" "$@"; then
		exec {lockfd}>&-
		echo "${shown}"
		return 0
	fi
	# Under the lock no build runs, so any build.* left is a killed one's.
	rm -rf "${root}"/build.*
	local tmp
	tmp=$(mktemp -d "${root}/build.XXXXXX")
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '${tmp}'" EXIT
	mkdir "${tmp}/entry" "${tmp}/scratch"
	("${build}" "${tmp}/entry" "${tmp}/scratch")
	if ! cachedbuild_complete "${tmp}/entry" "$@"; then
		echo "cachedbuild: ${build} did not make all of: $*" >&2
		rm -rf "${tmp}"
		trap - EXIT
		exec {lockfd}>&-
		return 1
	fi
	# Publish with one rename; what is there is incomplete (step 3 looked).
	rm -rf "${out}"
	mv "${tmp}/entry" "${out}"
	if [ -n "${after}" ]; then
		"${after}" "${out}"
	fi
	rm -rf "${tmp}"
	trap - EXIT
	exec {lockfd}>&-
	echo "${shown}"
}
