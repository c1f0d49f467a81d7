#!/usr/bin/env bash
# Tests scripts/lib/cachedbuild.sh with a temporary cache root and fake
# builds (no Go): a second call does not rebuild; --check on a missing entry
# exits 3 with its message and writes nothing; a failed build (an error, or
# a listed file not made) leaves no entry and no temp directory; a killed
# build's temp directory is removed by the next build; two concurrent calls
# build once, the second waiting on the lock, and no reader sees the entry
# before the build is done. Prints "ok" and exits 0, or names each failure
# and exits 1. .ci/run runs it.
set -euo pipefail
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cachedbuild.sh"
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

# call ROOT ARGS... runs cachedbuild in a fresh bash, as the scripts do, with
# the fake builds below; each build appends a line to ROOT/../builds.
call() {
	local root=$1
	shift
	PULLRECORDS_K8S_CACHE=${root} bash -c '
		set -euo pipefail
		. "$1"
		shift
		log=${PULLRECORDS_K8S_CACHE}.builds
		good() { echo built >>"${log}"; printf "#!/bin/sh\n" >"$1/prog"; chmod +x "$1/prog"; echo scratch >"$2/x"; }
		broken() { echo built >>"${log}"; printf "#!/bin/sh\n" >"$1/prog"; chmod +x "$1/prog"; false; echo "went on after a failure"; }
		incomplete() { echo built >>"${log}"; : >"$1/prog"; }
		# waits for the test to say go, telling it the build started
		blocking() {
			: >"${PULLRECORDS_K8S_CACHE}.started"
			until [ -e "${PULLRECORDS_K8S_CACHE}.go" ]; do sleep 0.05; done
			good "$@"
		}
		cachedbuild "$@"
	' _ "${LIB}" "$@"
}
builds() { # ROOT: how many builds ran
	if [ -f "$1.builds" ]; then wc -l <"$1.builds"; else echo 0; fi
}
leftovers() { # ROOT: temp directories left
	find "$1" -maxdepth 1 -name 'build.*' | wc -l
}

# A second call does not rebuild, and prints the same path.
root=${work}/again/cache
first=$(call "${root}" --print prog e k1 good prog)
second=$(call "${root}" --print prog e k1 good prog)
[ "${first}" = "${root}/e-k1/prog" ] || fail "first call printed '${first}', want ${root}/e-k1/prog"
[ "${second}" = "${first}" ] || fail "second call printed '${second}', want '${first}'"
[ "$(builds "${root}")" -eq 1 ] || fail "two calls built $(builds "${root}") times, want 1"
[ ! -e "${root}/e-k1/x" ] || fail "the scratch directory's file was published"
# An empty name: the entry is the key alone.
[ "$(call "${root}" "" k2 good prog)" = "${root}/k2" ] || fail "empty name: want ${root}/k2"
# Another key is another build.
call "${root}" e k3 good prog >/dev/null
[ "$(builds "${root}")" -eq 3 ] || fail "three keys built $(builds "${root}") times, want 3"
# --check on a complete entry prints it without building.
[ "$(call "${root}" --check nope e k1 good prog)" = "${root}/e-k1" ] || fail "--check on a built entry"
[ "$(builds "${root}")" -eq 3 ] || fail "--check on a built entry built"

# --check on a missing entry: exit 3, the message on stderr, nothing written.
root=${work}/check/cache
rc=0
call "${root}" --check "not built; run the script" e k1 good prog >"${work}/out" 2>"${work}/err" || rc=$?
[ "${rc}" -eq 3 ] || fail "--check on a missing entry: exit ${rc}, want 3"
[ "$(cat "${work}/err")" = "not built; run the script" ] || fail "--check stderr: '$(cat "${work}/err")'"
[ ! -s "${work}/out" ] || fail "--check on a missing entry printed '$(cat "${work}/out")'"
[ ! -e "${root}" ] || fail "--check on a missing entry created the cache root"
[ "$(builds "${root}")" -eq 0 ] || fail "--check built"

# A failed build leaves no entry and no temp directory, and the call fails;
# so does a build that goes on but leaves a listed file unmade (or not
# executable); a later good build of the key works.
for build in broken incomplete; do
	root=${work}/${build}/cache
	rc=0
	out=$(call "${root}" e k1 "${build}" prog 2>/dev/null) || rc=$?
	[ "${rc}" -ne 0 ] || fail "${build} build: exit 0"
	[ -z "${out}" ] || fail "${build} build printed '${out}'"
	[ ! -e "${root}/e-k1" ] || fail "${build} build left an entry"
	[ "$(leftovers "${root}")" -eq 0 ] || fail "${build} build left a temp directory"
	rc=0
	call "${root}" --check nope e k1 good prog >/dev/null 2>&1 || rc=$?
	[ "${rc}" -eq 3 ] || fail "after a ${build} build, --check exits ${rc}, want 3"
	[ "$(call "${root}" e k1 good prog)" = "${root}/e-k1" ] || fail "good build after a ${build} one"
done
# A listed file that is not executable does not count: the entry is rebuilt.
root=${work}/noexec/cache
call "${root}" e k1 good prog >/dev/null
chmod -x "${root}/e-k1/prog"
call "${root}" e k1 good prog >/dev/null
[ "$(builds "${root}")" -eq 2 ] || fail "an entry whose file lost its x bit was not rebuilt"
[ -x "${root}/e-k1/prog" ] || fail "the rebuilt entry's file is not executable"

# A killed build's temp directory goes with the next build.
root=${work}/killed/cache
mkdir -p "${root}/build.dead"
call "${root}" e k1 good prog >/dev/null
[ "$(leftovers "${root}")" -eq 0 ] || fail "a killed build's temp directory was left"

# Two concurrent calls build once: the first blocks in its build until told
# to go; the second is started then, and the test waits until it waits on
# the lock (its bash has a flock child), so it must find the first's build.
root=${work}/concurrent/cache
call "${root}" e k1 blocking prog >"${work}/a" &
a=$!
for _ in $(seq 1 1200); do [ -e "${root}.started" ] && break; sleep 0.05; done
[ -e "${root}.started" ] || fail "the first call's build never started"
[ ! -e "${root}/e-k1" ] || fail "the entry exists while its build runs"
call "${root}" e k1 blocking prog >"${work}/b" &
b=$!
waiting=0
for _ in $(seq 1 1200); do
	# b is the subshell running call; its child is the bash running cachedbuild.
	kids=$(pgrep -d, -P "${b}" || true)
	if [ -n "${kids}" ] && pgrep -P "${kids}" -x flock >/dev/null; then waiting=1; break; fi
	sleep 0.05
done
[ "${waiting}" -eq 1 ] || fail "the second call never waited on the lock"
: >"${root}.go"
wait "${a}" || fail "the first concurrent call failed"
wait "${b}" || fail "the second concurrent call failed"
[ "$(builds "${root}")" -eq 1 ] || fail "two concurrent calls built $(builds "${root}") times, want 1"
[ "$(cat "${work}/a")" = "${root}/e-k1" ] || fail "first concurrent call printed '$(cat "${work}/a")'"
[ "$(cat "${work}/b")" = "${root}/e-k1" ] || fail "second concurrent call printed '$(cat "${work}/b")'"

# Misuse is refused: without set -e, and with a key that is a path.
rc=0
PULLRECORDS_K8S_CACHE=${work}/misuse bash -c '. "$1"; f() { :; }; cachedbuild e k1 f prog' _ "${LIB}" 2>/dev/null || rc=$?
[ "${rc}" -eq 2 ] || fail "without set -e: exit ${rc}, want 2"
rc=0
call "${work}/misuse" e ../k1 good prog >/dev/null 2>&1 || rc=$?
[ "${rc}" -eq 2 ] || fail "a key with a slash: exit ${rc}, want 2"

if [ "${failures}" -ne 0 ]; then
	echo "cachedbuild_test: ${failures} failures" >&2
	exit 1
fi
echo ok
