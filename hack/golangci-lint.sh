#!/usr/bin/env bash
# Builds golangci-lint from the Go module proxy (no download site is needed)
# and prints the path of the binary. make lint (and so make verify) runs it
# with the repository's .golangci.yml.
#
# golangci-lint recommends its release binaries over `go install`, for a
# build with a known Go version; here the binary is built with the Go that
# builds the project (go.mod's), which is the one its checks must understand.
#
# The binary goes to bin/golangci-lint-v$GOLANGCI_LINT_VERSION and is reused
# when present. A copy is kept in the user's cache directory, so that another
# clone on the same machine links it instead of building for minutes again;
# it is keyed by the Go version too, since a linter built by an older Go
# cannot load packages written for a newer one.
set -euo pipefail

GOLANGCI_LINT_VERSION=2.15.0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bin/golangci-lint-v$GOLANGCI_LINT_VERSION"
gover=$(go env GOVERSION)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/playground/golangci-lint-v$GOLANGCI_LINT_VERSION-$gover-$(go env GOOS)-$(go env GOARCH)"

log() { echo "golangci-lint: $*" >&2; }

# A binary in bin/ built by another Go is stale: build or link again.
if [ -x "$out" ] && [ "$("$out" version 2>/dev/null | sed -n 's/.* built with \(go[^ ]*\) .*/\1/p')" = "$gover" ]; then
	echo "$out"
	exit 0
fi

# One build at a time per cache: a second clone that asks while the first
# builds waits for it and then links its result.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
if [ ! -x "$cache" ] && ! flock -n 9; then
	log "another build of golangci-lint is under way; waiting for it"
	flock 9
fi

if [ ! -x "$cache" ]; then
	log "building golangci-lint v$GOLANGCI_LINT_VERSION with $gover from the Go module proxy"
	log "(a few minutes on a cold cache; later runs reuse $cache)"
	tmp="$cache.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"
	# go install pkg@version builds outside this module, with golangci-lint's
	# own go.mod (go.sum checked against the checksum database), so every
	# dependency is the version its release pins. The version it reports is
	# taken from the module's build information.
	(cd / && GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-trimpath go install -ldflags "-s -w" \
		"github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$GOLANGCI_LINT_VERSION")
	mv "$tmp/golangci-lint" "$cache.bin.$$"
	mv "$cache.bin.$$" "$cache"
	rm -rf "$tmp"
	trap - EXIT
fi

mkdir -p "$(dirname "$out")"
ln "$cache" "$out.tmp.$$" 2>/dev/null || cp "$cache" "$out.tmp.$$"
mv "$out.tmp.$$" "$out"
echo "$out"
