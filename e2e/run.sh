#!/usr/bin/env bash
# End-to-end tests of cri/ and imagecache/ against a real containerd and two
# real registries, all started here on 127.0.0.1 in a temporary directory and
# always stopped on exit. Run as root from anywhere: bash e2e/run.sh
# (apt-get update must have been run; the packages are installed here).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$(date +%s)
log() { printf '[e2e %3ss] %s\n' "$(($(date +%s) - START))" "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
	echo "e2e/run.sh must run as root (containerd needs it)" >&2
	exit 1
fi

# --- packages -----------------------------------------------------------------
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v skopeo >/dev/null || need+=(skopeo)
command -v htpasswd >/dev/null || need+=(apache2-utils)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		containerd docker-registry skopeo apache2-utils >/dev/null
fi
# The Debian package may have started its own registry on :5000; ours use
# their own ports, but do not leave a stray service behind either.
if command -v systemctl >/dev/null && systemctl is-active --quiet docker-registry 2>/dev/null; then
	systemctl stop docker-registry || true
elif [ -x /etc/init.d/docker-registry ] && /etc/init.d/docker-registry status >/dev/null 2>&1; then
	/etc/init.d/docker-registry stop || true
fi
log "containerd: $(containerd --version | awk '{print $3}'), registry: $(docker-registry --version 2>/dev/null | awk '{print $3}'), skopeo: $(skopeo --version | awk '{print $3}')"

# --- temp dir and cleanup -------------------------------------------------------
TMP="$(mktemp -d /tmp/pullrecords-e2e.XXXXXX)"
PIDS=()
cleanup() {
	local rc=$?
	set +e
	if [ -f "$TMP/containerd.pid" ]; then
		PIDS+=("$(cat "$TMP/containerd.pid")")
	fi
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
	done
	# containerd keeps no mounts with the native snapshotter; unmount anything
	# left under the temp dir just in case before deleting it.
	grep -o " $TMP[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null
	if [ $rc -ne 0 ]; then
		for f in "$TMP"/*.log; do
			[ -f "$f" ] || continue
			echo "---- last lines of $f" >&2
			tail -n 30 "$f" >&2
		done
	fi
	rm -rf "$TMP"
	log "stopped everything (exit $rc)"
	exit $rc
}
trap cleanup EXIT INT TERM

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

wait_for() { # description, command...
	local what=$1
	shift
	for _ in $(seq 100); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	log "timed out waiting for $what"
	return 1
}

# --- registries -------------------------------------------------------------------
USER_NAME=tenant-a-robot
USER_PASS="$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20)"
htpasswd -Bbn "$USER_NAME" "$USER_PASS" >"$TMP/htpasswd"
AUTH_PORT=$(free_port)
OPEN_PORT=$(free_port)
while [ "$OPEN_PORT" = "$AUTH_PORT" ]; do OPEN_PORT=$(free_port); done

start_registry() { # name port [auth]
	local name=$1 port=$2 auth=${3:-}
	mkdir -p "$TMP/$name"
	{
		echo "version: 0.1"
		echo "log: {level: warn}"
		echo "storage:"
		echo "  filesystem: {rootdirectory: $TMP/$name/data}"
		echo "  delete: {enabled: true}"
		echo "http:"
		echo "  addr: 127.0.0.1:$port"
		echo "  secret: $(head -c 12 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
		if [ -n "$auth" ]; then
			echo "auth:"
			echo "  htpasswd: {realm: pullrecords-e2e, path: $TMP/htpasswd}"
		fi
	} >"$TMP/$name/config.yml"
	docker-registry serve "$TMP/$name/config.yml" >"$TMP/$name.log" 2>&1 &
	PIDS+=($!)
	wait_for "registry $name" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
}
start_registry registry-auth "$AUTH_PORT" auth
start_registry registry-open "$OPEN_PORT"
log "registries: auth 127.0.0.1:$AUTH_PORT, open 127.0.0.1:$OPEN_PORT"

# --- containerd ---------------------------------------------------------------------
CD="$TMP/containerd"
mkdir -p "$CD/root" "$CD/state" "$TMP/cni/bin" "$TMP/cni/conf"
SOCK="$CD/containerd.sock"
cat >"$CD/config.toml" <<TOML
version = 2
root = "$CD/root"
state = "$CD/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  disable_cgroup = true
  disable_apparmor = true
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$TMP/cni/bin"
    conf_dir = "$TMP/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:$AUTH_PORT"]
    endpoint = ["http://127.0.0.1:$AUTH_PORT"]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:$OPEN_PORT"]
    endpoint = ["http://127.0.0.1:$OPEN_PORT"]
TOML

# A control script the tests use to stop and start containerd mid-test.
cat >"$TMP/containerd-ctl" <<CTL
#!/usr/bin/env bash
set -eu
case "\$1" in
stop)
	if [ -f "$TMP/containerd.pid" ]; then
		pid=\$(cat "$TMP/containerd.pid")
		kill "\$pid" 2>/dev/null || true
		for _ in \$(seq 100); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "\$pid" 2>/dev/null || true
		rm -f "$TMP/containerd.pid"
	fi
	;;
start)
	containerd --config "$CD/config.toml" >>"$TMP/containerd.log" 2>&1 &
	echo \$! >"$TMP/containerd.pid"
	for _ in \$(seq 100); do [ -S "$SOCK" ] && exit 0; sleep 0.1; done
	echo "containerd did not create $SOCK" >&2
	exit 1
	;;
*)
	echo "usage: \$0 stop|start" >&2
	exit 2
	;;
esac
CTL
chmod +x "$TMP/containerd-ctl"
"$TMP/containerd-ctl" start
log "containerd: $SOCK"

# --- test images: OCI layouts built here, pushed with skopeo --------------------------
ARCH="$(go env GOARCH 2>/dev/null || dpkg --print-architecture)"
cat >"$TMP/policy.json" <<'JSON'
{"default":[{"type":"insecureAcceptAnything"}]}
JSON

sha() { sha256sum "$1" | cut -d' ' -f1; }
blob() { # file dir -> prints digest, moves file into the layout
	local d
	d=$(sha "$1")
	mv "$1" "$2/blobs/sha256/$d"
	echo "$d"
}
make_image() { # layout-dir content
	local dir=$1 content=$2 work
	work="$(mktemp -d "$TMP/build.XXXXXX")"
	mkdir -p "$dir/blobs/sha256"
	printf '%s\n' "$content" >"$work/hello.txt"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf "$work/layer.tar" hello.txt
	local diffid
	diffid=$(sha "$work/layer.tar")
	gzip -n -c "$work/layer.tar" >"$work/layer.tgz"
	local lsize ldig
	lsize=$(stat -c %s "$work/layer.tgz")
	ldig=$(blob "$work/layer.tgz" "$dir")
	printf '{"architecture":"%s","os":"linux","config":{"Cmd":["/hello.txt"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$ARCH" "$diffid" >"$work/config.json"
	local csize cdig
	csize=$(stat -c %s "$work/config.json")
	cdig=$(blob "$work/config.json" "$dir")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
		"$cdig" "$csize" "$ldig" "$lsize" >"$work/manifest.json"
	local msize mdig
	msize=$(stat -c %s "$work/manifest.json")
	mdig=$(blob "$work/manifest.json" "$dir")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}' \
		"$mdig" "$msize" >"$dir/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
	rm -rf "$work"
}
push() { # layout-dir destination [creds]
	local creds=()
	[ -n "${3:-}" ] && creds=(--dest-creds "$3")
	skopeo --policy "$TMP/policy.json" copy --quiet --dest-tls-verify=false "${creds[@]}" "oci:$1:v1" "docker://$2" >>"$TMP/skopeo.log" 2>&1
}

PRIVATE=()
PUBLIC=()
for i in 1 2 3; do
	make_image "$TMP/img/private$i" "private image $i $RANDOM"
	push "$TMP/img/private$i" "127.0.0.1:$AUTH_PORT/tenant-a/private$i:v1" "$USER_NAME:$USER_PASS"
	PRIVATE+=("127.0.0.1:$AUTH_PORT/tenant-a/private$i:v1")
done
for i in 1 2 3 4 5 6; do
	make_image "$TMP/img/public$i" "public image $i $RANDOM"
	push "$TMP/img/public$i" "127.0.0.1:$OPEN_PORT/public/app$i:v1"
	PUBLIC+=("127.0.0.1:$OPEN_PORT/public/app$i:v1")
done
log "pushed ${#PRIVATE[@]} private and ${#PUBLIC[@]} public images"

# --- tests --------------------------------------------------------------------------
export PULLRECORDS_E2E_CRI_ENDPOINT="unix://$SOCK"
export PULLRECORDS_E2E_AUTH_REGISTRY="127.0.0.1:$AUTH_PORT"
export PULLRECORDS_E2E_OPEN_REGISTRY="127.0.0.1:$OPEN_PORT"
export PULLRECORDS_E2E_REGISTRY_USER="$USER_NAME"
export PULLRECORDS_E2E_REGISTRY_PASSWORD="$USER_PASS"
export PULLRECORDS_E2E_PRIVATE_IMAGES="${PRIVATE[*]}"
export PULLRECORDS_E2E_PUBLIC_IMAGES="${PUBLIC[*]}"
export PULLRECORDS_E2E_CONTAINERD_CTL="$TMP/containerd-ctl"
cd "$REPO"
log "running go test -tags e2e ./e2e/..."
T0=$(date +%s)
go test -tags e2e -count=1 -v ./e2e/... "$@"
log "go test took $(($(date +%s) - T0))s"
