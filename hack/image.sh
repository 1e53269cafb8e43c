#!/usr/bin/env bash
# Builds the Playground container image without a container daemon or a
# registry (make image): a Debian root made by mmdebstrap from Debian's
# packages (hack/image/packages.txt, the same list the Dockerfile installs),
# plus a layer with playground, playground-sandbox, kubectl-playground and
# playground-example-worker (a worker to try the workers catalog with),
# assembled by hack/image (go-containerregistry) into an OCI archive:
#
#   bin/playground-image.oci.tar   (an OCI image layout in a tar)
#
# It prints the archive's path, the image's digest and its size.
#
# Reproducible: every time in the image is SOURCE_DATE_EPOCH (by default the
# last commit's time), the Go binaries are built with -trimpath and
# -buildvcs=false, and the layers' entries are sorted with fixed owners and
# times, so the same base layer and the same sources give the same digest.
# The base layer is cached (see below); the Debian packages in it are
# whatever versions the mirror had when it was made: no snapshot mirror is
# reachable here to pin them, so a base made on another day may differ.
#
# The base layer depends only on the package list, the Debian suite, this
# script's BASE_REVISION and the time of the last change to either file, and is kept in the user's cache directory, under a
# lock, so that a rebuild after a Go change takes seconds. IMAGE_REFRESH=1
# remakes it (for the mirror's security updates).
#
# Environment: IMAGE (the reference, default
# ghcr.io/playground-dev/playground:<the chart's appVersion>), IMAGE_OUT,
# DEBIAN_SUITE, DEBIAN_MIRROR, SOURCE_DATE_EPOCH, IMAGE_REFRESH.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Bump when the way the base is made changes (mmdebstrap's options below).
BASE_REVISION=1
# The Dockerfile's DEBIAN_SUITE must agree (test/image checks it).
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' charts/playground/Chart.yaml)
IMAGE=${IMAGE:-ghcr.io/playground-dev/playground:$app_version}
out=${IMAGE_OUT:-$root/bin/playground-image.oci.tar}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH

log() { echo "image: $*" >&2; }
packages() { sed 's/#.*//' hack/image/packages.txt | tr -s ' \t' '\n' | grep -v '^$'; }

# The base's times are those of the last change to its inputs, not of the
# commit being built, so that one base serves every commit.
base_epoch=$(git log -1 --format=%ct -- hack/image/packages.txt hack/image.sh 2>/dev/null || true)
base_epoch=${base_epoch:-$SOURCE_DATE_EPOCH}

arch=$(go env GOARCH)
key=$( (echo "$BASE_REVISION $base_epoch $DEBIAN_SUITE $DEBIAN_MIRROR $DEBIAN_SECURITY_MIRROR $arch"; packages) | sha256sum | cut -c1-16)
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/playground/image"
base="$cache_dir/base-$DEBIAN_SUITE-$arch-$key.tar.gz"
mkdir -p "$cache_dir" "$(dirname "$out")"

# The assembling tool, from its own module (go-containerregistry stays out
# of the main module).
tool="$root/bin/.image-tool"
(cd hack/image && CGO_ENABLED=0 GOOS= GOARCH= go build -trimpath -o "$tool" .)

# One base build at a time: a second build waits for the first and uses it.
exec 9>"$cache_dir/base.lock"
flock 9
if [ "${IMAGE_REFRESH:-}" = 1 ]; then rm -f "$base"; fi
if [ ! -s "$base" ]; then
	if ! command -v mmdebstrap >/dev/null 2>&1; then
		log "installing mmdebstrap"
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends mmdebstrap
	fi
	# root mode when root; unshare mode (user namespaces) otherwise.
	mode=unshare
	[ "$(id -u)" -eq 0 ] && mode=root
	log "making the Debian $DEBIAN_SUITE root from $DEBIAN_MIRROR (mmdebstrap; about 100 MB of packages; later builds reuse $base)"
	tmp=$(mktemp -d "$cache_dir/base.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# The variant "apt" is Debian's essential set plus apt; the list adds the
	# rest. Documentation, manuals and translations are left out (the
	# copyright files stay), and the logs and caches of the installation,
	# which say when it ran, are removed. mmdebstrap writes the tar sorted
	# by name and clamps its times to SOURCE_DATE_EPOCH.
	SOURCE_DATE_EPOCH=$base_epoch mmdebstrap --mode="$mode" --variant=apt --format=tar --architectures="$arch" \
		--include="$(packages | paste -sd, -)" \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--customize-hook='rm -rf "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log "$1"/var/cache/ldconfig/aux-cache "$1"/var/lib/dpkg/*-old "$1"/var/cache/debconf/*-old' \
		--customize-hook='rm -f "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id; touch "$1"/etc/machine-id' \
		"$DEBIAN_SUITE" "$tmp/root.tar" \
		"deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
		"deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
		"deb $DEBIAN_SECURITY_MIRROR $DEBIAN_SUITE-security main" >&2
	"$tool" base-layer --epoch "$base_epoch" "$tmp/root.tar" "$tmp/base.tar.gz"
	mv "$tmp/base.tar.gz" "$base"
	rm -rf "$tmp"
	trap - EXIT
fi
flock -u 9

# The binaries: static (CGO_ENABLED=0, the image's glibc plays no part),
# without paths or VCS stamps, stripped.
bins="$root/bin/.image-bin"
rm -rf "$bins"
mkdir -p "$bins"
for cmd in playground playground-sandbox kubectl-playground playground-example-worker; do
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "$bins/$cmd" "./cmd/$cmd"
done
# gVisor's runtime, for Sandboxes of isolation gvisor: the agent offers it
# when runsc is on its PATH (hack/runsc.sh pins and builds it).
cp "$("$root/hack/runsc.sh")" "$bins/runsc"

rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
digest=$("$tool" build --epoch "$SOURCE_DATE_EPOCH" --arch "$arch" --base "$base" --bin "$bins" --name "$IMAGE" --out "$out" \
	--label "org.opencontainers.image.source=https://github.com/playground-dev/playground" \
	--label "org.opencontainers.image.version=${IMAGE##*:}" \
	--label "org.opencontainers.image.revision=$rev" \
	--label "org.opencontainers.image.licenses=Apache-2.0")
rm -rf "$bins"

size=$(stat -c %s "$out")
echo "archive: $out"
echo "image:   $IMAGE"
echo "digest:  $digest"
echo "size:    $size bytes ($(numfmt --to=iec-i --suffix=B "$size"))"
