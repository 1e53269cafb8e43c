#!/usr/bin/env bash
# Builds a small image from this machine's own files and pushes it, so that
# `make smoke` runs hack/smoke.sh in sandboxes whose system is an image
# (docs/images.md), with no registry but one on loopback:
#
#   hack/smoke-image.sh CRANE REGISTRY NAME
#
# CRANE is hack/crane.sh's binary, REGISTRY a plain-HTTP registry
# (host:port), NAME the repository and tag (smoke/system:v1). The image is
# one layer: dash as /bin/sh, the tools hack/smoke.sh runs in a sandbox,
# each with the libraries ldd names, on a merged /usr, and an
# /etc/os-release whose ID is playground-smoke (hack/smoke.sh
# --os-release checks it). It prints the image's reference by tag.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: hack/smoke-image.sh CRANE REGISTRY NAME" >&2; exit 2; }
crane=$1 registry=$2 name=$3
# What hack/smoke.sh runs in a sandbox (the shell's builtins aside).
tools=(dash setsid sleep cat mv rm tr head tail awk sort uname ls grep test)

work=$(mktemp -d "${TMPDIR:-/tmp}/playground-smoke-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
fs=$work/fs
mkdir -p "$fs/usr/bin" "$fs/usr/lib" "$fs/etc" "$fs/tmp"
ln -s usr/bin "$fs/bin"
ln -s usr/lib "$fs/lib"
copy() { # copy a file of the node's to the same place under /usr
	local rel=${1#/}
	rel=${rel#usr/}
	mkdir -p "$fs/usr/$(dirname "$rel")"
	cp -L "$1" "$fs/usr/$rel"
}
for t in "${tools[@]}"; do
	p=$(type -P "$t") || { echo "smoke-image: $t is not on this machine" >&2; exit 1; }
	cp -L "$p" "$fs/usr/bin/$t"
	while read -r lib; do
		[ -n "$lib" ] && copy "$lib"
	done < <(ldd "$p" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
ln -sf dash "$fs/usr/bin/sh"
# The loader's path is fixed in the binaries (/lib64/ld-linux-x86-64.so.2).
[ ! -d "$fs/usr/lib64" ] || ln -s usr/lib64 "$fs/lib64"
printf 'ID=playground-smoke\nNAME="Playground smoke image"\n' >"$fs/etc/os-release"
tar --numeric-owner --owner=0 --group=0 -C "$fs" -cf "$work/layer.tar" .

ref=$registry/$name
crane() { "$crane" "$@" >/dev/null 2>"$work/crane.log" || { cat "$work/crane.log" >&2; exit 1; }; }
crane append --insecure --oci-empty-base -f "$work/layer.tar" -t "$ref"
crane mutate --insecure --set-platform "linux/$(go env GOARCH)" --env PATH=/usr/bin:/bin -t "$ref" "$ref"
echo "$ref"
