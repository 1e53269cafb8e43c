#!/usr/bin/env bash
# Builds helm from the Go module proxy (no download site is needed) and
# prints the path of the binary. The chart test (test/manifests) and
# docs/install.md use it.
#
# The binary goes to bin/helm-v$HELM_VERSION and is reused when present. A
# copy is kept in the user's cache directory, so that another clone on the
# same machine links it instead of building for minutes again.
set -euo pipefail

HELM_VERSION=3.22.0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bin/helm-v$HELM_VERSION"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/helm-v$HELM_VERSION-$(go env GOOS)-$(go env GOARCH)"

log() { echo "helm: $*" >&2; }

if [ -x "$out" ]; then echo "$out"; exit 0; fi

if [ ! -x "$cache" ]; then
	log "building helm v$HELM_VERSION from the Go module proxy"
	log "(a few minutes on a cold cache; later runs reuse $cache)"
	tmp="$root/bin/.tmp-helm.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp" "$(dirname "$cache")"
	# The ldflags are those of helm's Makefile: its version, and the
	# Kubernetes version that `helm template` and `helm lint` assume (without
	# them, v1.20), taken from the k8s.io/client-go that helm's go.mod requires.
	gomod=$(cd / && go mod download -json "helm.sh/helm/v3@v$HELM_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	k8s=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")
	major=1 minor=$(echo "$k8s" | cut -d. -f2)
	[[ "$minor" =~ ^[0-9]+$ ]] || { log "cannot tell the client-go version of helm v$HELM_VERSION from $gomod"; exit 1; }
	ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
	for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
		ldflags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
	done
	# go install pkg@version builds outside this module, with helm's own go.mod.
	(cd / && GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-trimpath go install -ldflags "$ldflags" \
		"helm.sh/helm/v3/cmd/helm@v$HELM_VERSION")
	mv "$tmp/helm" "$cache.tmp.$$"
	mv "$cache.tmp.$$" "$cache"
	rm -rf "$tmp"
	trap - EXIT
fi

mkdir -p "$(dirname "$out")"
ln "$cache" "$out.tmp.$$" 2>/dev/null || cp "$cache" "$out.tmp.$$"
mv "$out.tmp.$$" "$out"
echo "$out"
