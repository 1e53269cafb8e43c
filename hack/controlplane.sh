#!/usr/bin/env bash
# Builds the control plane that envtest and `playground-dev` run on:
# kube-apiserver, kubectl and etcd, from the Go module proxy (no download
# site is needed). Prints the directory that holds them.
#
# The binaries go to bin/k8s/<version>/ and are reused when that directory is
# complete. A copy is kept in the user's cache directory, so that another
# clone on the same machine links it instead of building for minutes again.
set -euo pipefail

KUBE_VERSION=1.37.2
ETCD_VERSION=3.6.16

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bin/k8s/$KUBE_VERSION"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/k8s/$KUBE_VERSION-etcd$ETCD_VERSION-$(go env GOOS)-$(go env GOARCH)"
bins=(kube-apiserver kubectl etcd)

complete() { [ -f "$1/.complete" ] && for b in "${bins[@]}"; do [ -x "$1/$b" ] || return 1; done; }
log() { echo "controlplane: $*" >&2; }

if complete "$out"; then echo "$out"; exit 0; fi

# One build at a time per cache: a second clone (or test binary) that asks
# while the first builds waits for it and then links its result.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
if ! complete "$cache" && ! flock -n 9; then
	log "another build of the control plane is under way; waiting for it"
	flock 9
fi

if ! complete "$cache"; then
	log "building kube-apiserver, kubectl v$KUBE_VERSION and etcd v$ETCD_VERSION from the Go module proxy"
	log "(several minutes on a cold cache; later runs reuse $cache)"
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	ver=k8s.io/component-base/version
	ldflags="-s -w -X $ver.gitVersion=v$KUBE_VERSION -X $ver.gitMajor=${KUBE_VERSION%%.*}"
	ldflags+=" -X $ver.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $ver.gitTreeState=clean"
	(cd "$root/hack/controlplane/kube" &&
		CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
			k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
	(cd "$root/hack/controlplane/etcd" &&
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .)
	touch "$tmp/.complete"
	rm -rf "$cache"
	mv "$tmp" "$cache"
	trap - EXIT
fi

rm -rf "$out"
mkdir -p "$out"
for b in "${bins[@]}"; do
	ln "$cache/$b" "$out/$b" 2>/dev/null || cp "$cache/$b" "$out/$b"
done
touch "$out/.complete"
echo "$out"
