#!/usr/bin/env bash
# Builds hack/s3server, the S3-compatible server that the snapshot store's
# tests (internal/s3test, through $PLAYGROUND_S3SERVER) run on loopback
# (`make dev` will, once the store is wired in), from the Go module proxy (no download site is needed), and
# prints the path of the binary. It is gofakes3's implementation of the S3
# API over a bbolt file; hack/s3server/go.sum pins every module.
#
# It does not check request signatures. SeaweedFS (`weed mini`), which
# checks them, builds from the proxy too and serves this store as well,
# but its 1,740 packages took 10 minutes of CPU (593 s; 44 minutes of wall
# time at nice 19 on the 2-core machine at a load of 20, 3 more to
# download its modules) for a 164 MB binary, against 45 s of CPU and 7 MB
# here (measured on 2026-12-07 from empty build caches).
#
# The binary goes to bin/s3server-<hash of hack/s3server> and is reused
# when present; a copy is kept in the user's cache directory, so that
# another clone on the same machine links it instead of building again.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/hack/s3server"
version=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)
out="$root/bin/s3server-$version"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/s3server/$version-$(go env GOOS)-$(go env GOARCH)"

log() { echo "s3server: $*" >&2; }

complete() { [ -f "$1/.complete" ] && [ -x "$1/s3server" ]; }

if [ -x "$out" ]; then echo "$out"; exit 0; fi

# One build at a time per cache: a second clone (or test binary) that asks
# while the first builds waits for it and then links its result.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
if ! complete "$cache" && ! flock -n 9; then
	log "another build of the S3 server is under way; waiting for it"
	flock 9
fi

if ! complete "$cache"; then
	log "building the S3 server (hack/s3server) from the Go module proxy"
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/s3server" .)
	touch "$tmp/.complete"
	rm -rf "$cache"
	mv "$tmp" "$cache"
	trap - EXIT
fi

mkdir -p "$(dirname "$out")"
ln "$cache/s3server" "$out.tmp.$$" 2>/dev/null || cp "$cache/s3server" "$out.tmp.$$"
mv "$out.tmp.$$" "$out"
echo "$out"
