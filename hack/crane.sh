#!/usr/bin/env bash
# Builds crane, go-containerregistry's registry tool, from the Go module
# proxy and prints the path of the binary. `make smoke` (hack/dev-smoke.sh)
# serves a registry on loopback with `crane registry serve` (the same
# registry implementation the Go tests serve in process) and pushes the
# image its image tenants run (hack/smoke-image.sh).
#
# The version is the one go.mod pins, so that the tool and the library the
# node's store pulls with are the same code. The binary goes to
# bin/crane-$CRANE_VERSION and is reused when present; a copy is kept in the
# user's cache directory for other clones on the same machine.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CRANE_VERSION=$(cd "$root" && go list -m -f '{{.Version}}' github.com/google/go-containerregistry)
out="$root/bin/crane-$CRANE_VERSION"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/crane-$CRANE_VERSION-$(go env GOOS)-$(go env GOARCH)"

log() { echo "crane: $*" >&2; }

if [ -x "$out" ]; then echo "$out"; exit 0; fi

mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
if [ ! -x "$cache" ] && ! flock -n 9; then
	log "another build of crane is under way; waiting for it"
	flock 9
fi

if [ ! -x "$cache" ]; then
	log "building crane $CRANE_VERSION from the Go module proxy (under a minute; later runs reuse $cache)"
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	# go install pkg@version builds outside this module, with the tool's
	# own go.mod.
	(cd / && GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-trimpath go install -ldflags "-s -w" \
		"github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION")
	mv "$tmp/crane" "$cache.bin.$$"
	mv "$cache.bin.$$" "$cache"
	rm -rf "$tmp"
	trap - EXIT
fi

mkdir -p "$(dirname "$out")"
ln "$cache" "$out.tmp.$$" 2>/dev/null || cp "$cache" "$out.tmp.$$"
mv "$out.tmp.$$" "$out"
echo "$out"
