#!/usr/bin/env bash
# Builds the rest of a Kubernetes node for hack/cluster.sh, beside what
# hack/controlplane.sh builds (kube-apiserver, kubectl,
# kube-controller-manager, etcd): kube-scheduler, kubelet and kube-proxy,
# from the same k8s.io/kubernetes version and the same pinned module
# (hack/controlplane/kube). Prints the directory that holds them together
# with the control plane's.
#
# Same layout as hack/controlplane.sh: bin/k8s/<version>-node/, reused when
# complete, built once per machine into the user's cache under a flock.
# `make test` does not need these and never builds them.
#
# hack/cluster-binaries.sh --cached builds nothing and says by its exit
# status whether the binaries are built already (.ci/run asks).
set -euo pipefail

KUBE_VERSION=1.37.2

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bin/k8s/$KUBE_VERSION-node"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/k8s/$KUBE_VERSION-node-$(go env GOOS)-$(go env GOARCH)"
bins=(kube-scheduler kubelet kube-proxy)
cp_bins=(kube-apiserver kubectl kube-controller-manager etcd)

complete() { [ -f "$1/.complete" ] && for b in "${bins[@]}"; do [ -x "$1/$b" ] || return 1; done; }
has_control_plane() { for b in "${cp_bins[@]}"; do [ -x "$1/$b" ] || return 1; done; }

if [ "${1:-}" = "--cached" ]; then
	complete "$out" || complete "$cache"
	exit
fi
cp_dir=$("$root/hack/controlplane.sh")
log() { echo "cluster-binaries: $*" >&2; }

link_out() {
	rm -rf "$out"
	mkdir -p "$out"
	for b in "${bins[@]}"; do
		ln "$cache/$b" "$out/$b" 2>/dev/null || cp "$cache/$b" "$out/$b"
	done
	for b in "${cp_bins[@]}"; do
		ln "$cp_dir/$b" "$out/$b" 2>/dev/null || cp "$cp_dir/$b" "$out/$b"
	done
	touch "$out/.complete"
}

if complete "$out" && has_control_plane "$out"; then echo "$out"; exit 0; fi

mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
if ! complete "$cache" && ! flock -n 9; then
	log "another build of the node binaries is under way; waiting for it"
	flock 9
fi

if ! complete "$cache"; then
	log "building ${bins[*]} v$KUBE_VERSION from the Go module proxy"
	log "(many minutes on a cold cache; later runs reuse $cache)"
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	ver=k8s.io/component-base/version
	ldflags="-s -w -X $ver.gitVersion=v$KUBE_VERSION -X $ver.gitMajor=${KUBE_VERSION%%.*}"
	ldflags+=" -X $ver.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $ver.gitTreeState=clean"
	pkgs=()
	for b in "${bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	# Static like the release binaries: the kubelet needs no cgo on Linux.
	(cd "$root/hack/controlplane/kube" &&
		CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
	touch "$tmp/.complete"
	rm -rf "$cache"
	mv "$tmp" "$cache"
	trap - EXIT
fi

link_out
echo "$out"
