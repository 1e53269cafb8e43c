#!/usr/bin/env bash
# Builds runsc, gVisor's OCI runtime, from the Go module proxy (no download
# site is needed) and prints the path of the binary. The oci backend's
# gVisor tests (TestConformanceGVisor) and agents started with --runsc use it.
#
# gVisor publishes no release tags to the proxy: its `go` branch (the tree
# with the generated Go files that `go build` needs, unlike master, which
# builds with Bazel) is reached by pseudo-version. RUNSC_VERSION pins one
# commit of that branch; `go list -m -json gvisor.dev/gvisor@latest` names
# the newest.
#
# The binary goes to bin/runsc-$RUNSC_VERSION and is reused when present. A
# copy is kept in the user's cache directory, so that another clone on the
# same machine links it instead of building for minutes again.
set -euo pipefail

RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bin/runsc-$RUNSC_VERSION"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/runsc-$RUNSC_VERSION-$(go env GOOS)-$(go env GOARCH)"

log() { echo "runsc: $*" >&2; }

if [ -x "$out" ]; then echo "$out"; exit 0; fi

if [ "$(go env GOOS)" != linux ]; then
	log "gVisor runs on Linux only"
	exit 1
fi

# One build at a time per cache: a second clone (or test binary) that asks
# while the first builds waits for it and then links its result.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
if [ ! -x "$cache" ] && ! flock -n 9; then
	log "another build of runsc is under way; waiting for it"
	flock 9
fi

if [ ! -x "$cache" ]; then
	log "building runsc $RUNSC_VERSION from the Go module proxy"
	log "(about 2 to 4 minutes on a cold cache; later runs reuse $cache)"
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	# go install pkg@version builds outside this module, with gVisor's own
	# go.mod. Static: runsc re-executes itself as the sandbox and the gofer
	# in an empty chroot.
	(cd / && GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-trimpath go install -ldflags "-s -w" \
		"gvisor.dev/gvisor/runsc@$RUNSC_VERSION")
	mv "$tmp/runsc" "$cache.bin.$$"
	mv "$cache.bin.$$" "$cache"
	rm -rf "$tmp"
	trap - EXIT
fi

mkdir -p "$(dirname "$out")"
ln "$cache" "$out.tmp.$$" 2>/dev/null || cp "$cache" "$out.tmp.$$"
mv "$out.tmp.$$" "$out"
echo "$out"
