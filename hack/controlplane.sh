#!/usr/bin/env bash
# Builds the control plane that envtest and `playground-dev` run on:
# kube-apiserver, kubectl, kube-controller-manager and etcd, from the Go
# module proxy (no download site is needed). Prints the directory that
# holds them. (envtest runs no controller manager unless a test asks for
# it; playground-dev runs one, for garbage collection and namespace
# deletion.)
#
# The binaries go to bin/k8s/<version>/ and are reused when that directory is
# complete. A copy is kept in the user's cache directory, so that another
# clone on the same machine links it instead of building for minutes again.
# A cache is complete when it holds every binary of bins: one built before
# a binary joined the list (kube-controller-manager did) keeps what it has
# and builds only what it lacks.
set -euo pipefail

KUBE_VERSION=1.37.2
ETCD_VERSION=3.6.16

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bin/k8s/$KUBE_VERSION"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/k8s/$KUBE_VERSION-etcd$ETCD_VERSION-$(go env GOOS)-$(go env GOARCH)"
bins=(kube-apiserver kubectl kube-controller-manager etcd)

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
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	# What an older cache holds is kept: only the missing binaries build.
	kube=()
	for b in "${bins[@]}"; do
		if [ -x "$cache/$b" ]; then
			ln "$cache/$b" "$tmp/$b" 2>/dev/null || cp "$cache/$b" "$tmp/$b"
		elif [ "$b" != etcd ]; then
			kube+=("$b")
		fi
	done
	if [ "${#kube[@]}" -gt 0 ]; then
		log "building ${kube[*]} v$KUBE_VERSION from the Go module proxy"
		log "(several minutes on a cold cache; later runs reuse $cache)"
		ver=k8s.io/component-base/version
		ldflags="-s -w -X $ver.gitVersion=v$KUBE_VERSION -X $ver.gitMajor=${KUBE_VERSION%%.*}"
		ldflags+=" -X $ver.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $ver.gitTreeState=clean"
		pkgs=()
		for b in "${kube[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
		(cd "$root/hack/controlplane/kube" &&
			CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
	fi
	if [ ! -x "$tmp/etcd" ]; then
		log "building etcd v$ETCD_VERSION from the Go module proxy"
		(cd "$root/hack/controlplane/etcd" &&
			CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .)
	fi
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
