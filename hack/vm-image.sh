#!/usr/bin/env bash
# Builds what the vm backend boots, from Debian's packages only, without a
# loop mount, a container daemon or a download site:
#
#   <cache>/kernel-<release>/vmlinuz     the kernel of linux-image-amd64
#   <cache>/kernel-<release>/modules/    the few modules the guest needs
#                                        (virtio, virtio-blk, virtio-console,
#                                        ext4 and what they depend on)
#   <cache>/root-<suite>-<key>.ext4      the read-only root filesystem
#
# Debian builds virtio, virtio_pci, virtio_blk, virtio_console and ext4 as
# modules, so the kernel cannot mount a virtio disk by itself. The agent
# makes a tiny initramfs at boot from the playground-sandbox binary (its
# /init) and these modules (hostagent/backend/vm): the guest binary is never
# baked into the root image, so the image does not change with the agent.
#
# The kernel is fetched with `apt-get download` and unpacked with dpkg-deb
# (nothing is installed on the host). The root is mmdebstrap's minbase plus
# the sandbox user and the guest's mount points, with no setuid or setgid
# file (su, mount, passwd...: nothing in a guest raises a tenant; the guest
# also mounts the root nosuid and runs everything with no_new_privs), as a
# tar turned into an ext4 image by mkfs.ext4 -d (under fakeroot when not
# root, so ownership survives). Both are kept in the user's cache directory under a lock; a
# second build waits for the first and reuses it. VM_IMAGE_REFRESH=1 remakes
# them (for the mirror's security updates).
#
# It prints the three paths as shell assignments (PLAYGROUND_VM_KERNEL,
# PLAYGROUND_VM_MODULES, PLAYGROUND_VM_ROOT), so `eval "$(hack/vm-image.sh)"`
# sets them.
#
# Environment: DEBIAN_SUITE, DEBIAN_MIRROR, VM_IMAGE_REFRESH.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Bump when the way the root or the module set is made changes.
VM_REVISION=1
# ROOT_REVISION changes with what the root image holds (not the kernel).
ROOT_REVISION=3
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PATH="$PATH:/usr/sbin:/sbin"

log() { echo "vm-image: $*" >&2; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

need=()
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
# Not needed to build, but whoever builds the image means to boot it.
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ "$(id -u)" -eq 0 ] || command -v fakeroot >/dev/null 2>&1 || need+=(fakeroot)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# The modules the guest loads, relative to lib/modules/<release>/kernel; the
# agent orders them by their dependencies (.modinfo) and refuses a set that
# misses one.
modules=(
	drivers/virtio/virtio.ko
	drivers/virtio/virtio_ring.ko
	drivers/virtio/virtio_pci_modern_dev.ko
	drivers/virtio/virtio_pci_legacy_dev.ko
	drivers/virtio/virtio_pci.ko
	drivers/block/virtio_blk.ko
	drivers/char/virtio_console.ko
	lib/crc16.ko
	crypto/crc32c_generic.ko
	fs/mbcache.ko
	fs/jbd2/jbd2.ko
	fs/ext4/ext4.ko
)

arch=$(dpkg --print-architecture)
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/playground/vm"
mkdir -p "$cache_dir"
exec 9>"$cache_dir/build.lock"
flock 9

tmp=$(mktemp -d "$cache_dir/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The kernel: linux-image-<arch> names the current ABI's package.
kpkg=$(apt-cache depends "linux-image-$arch" 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
if [ -z "$kpkg" ]; then
	$sudo apt-get update -qq
	kpkg=$(apt-cache depends "linux-image-$arch" | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
fi
release=${kpkg#linux-image-}
kdir="$cache_dir/kernel-$release-r$VM_REVISION"
if [ "${VM_IMAGE_REFRESH:-}" = 1 ]; then rm -rf "$kdir"; fi
if [ ! -s "$kdir/vmlinuz" ]; then
	log "fetching $kpkg (apt-get download)"
	(cd "$tmp" && apt-get download -q "$kpkg" >&2)
	dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/k"
	mkdir -p "$tmp/kernel/modules"
	cp "$tmp/k/boot/vmlinuz-$release" "$tmp/kernel/vmlinuz"
	cp "$tmp/k/boot/config-$release" "$tmp/kernel/config"
	for m in "${modules[@]}"; do
		cp "$tmp/k/lib/modules/$release/kernel/$m" "$tmp/kernel/modules/"
	done
	echo "$release" >"$tmp/kernel/release"
	rm -rf "$kdir"
	mv "$tmp/kernel" "$kdir"
	rm -rf "$tmp/k" "$tmp"/*.deb
fi

# The root: its content depends on the suite, the mirrors and this script.
key=$(echo "$VM_REVISION $ROOT_REVISION $DEBIAN_SUITE $DEBIAN_MIRROR $DEBIAN_SECURITY_MIRROR $arch" | sha256sum | cut -c1-16)
rootimg="$cache_dir/root-$DEBIAN_SUITE-$arch-$key.ext4"
if [ "${VM_IMAGE_REFRESH:-}" = 1 ]; then rm -f "$rootimg"; fi
if [ ! -s "$rootimg" ]; then
	mode=unshare
	[ "$(id -u)" -eq 0 ] && mode=root
	log "making the Debian $DEBIAN_SUITE root (mmdebstrap minbase; later builds reuse $rootimg)"
	# The guest's mount points and the tenant's user (guestapi.TenantUID,
	# guestapi.TenantUser) are part of the image: the root is read-only.
	mmdebstrap --mode="$mode" --variant=minbase --format=tar --architectures="$arch" \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--customize-hook='rm -rf "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/*' \
		--customize-hook='rm -f "$1"/etc/machine-id; touch "$1"/etc/machine-id' \
		--customize-hook='chroot "$1" groupadd -g 1000 sandbox' \
		--customize-hook='chroot "$1" useradd -u 1000 -g 1000 -d /home/sandbox -s /bin/sh sandbox' \
		--customize-hook='find "$1" -xdev -type f -perm /6000 -exec chmod ug-s {} +' \
		--customize-hook='mkdir -p "$1"/.playground "$1"/workspace "$1"/pile "$1"/home/sandbox "$1"/opt/faculties' \
		--customize-hook='for f in passwd group hosts hostname resolv.conf nsswitch.conf profile; do rm -f "$1/etc/$f"; ln -s /.playground/etc/$f "$1/etc/$f"; done' \
		"$DEBIAN_SUITE" "$tmp/root.tar" \
		"deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
		"deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
		"deb $DEBIAN_SECURITY_MIRROR $DEBIAN_SUITE-security main" >&2
	# Room for the files plus a quarter: the image is read-only, so the
	# slack only has to cover ext4's own metadata.
	mb=$(($(stat -c %s "$tmp/root.tar") * 5 / 4 / 1048576 + 32))
	# No journal (nothing writes to it); fixed UUID so the same tree
	# gives the same superblock identity.
	mkimg="mkdir '$tmp/root' && tar -C '$tmp/root' --numeric-owner -xpf '$tmp/root.tar' &&
		mkfs.ext4 -q -F -L playground-root -U 6f1a1c55-0000-4000-8000-000000000001 -O ^has_journal -m 0 -E root_owner=0:0 -d '$tmp/root' '$tmp/root.ext4' ${mb}M >&2"
	if [ "$(id -u)" -eq 0 ]; then sh -c "$mkimg"; else fakeroot -- sh -c "$mkimg"; fi
	mv "$tmp/root.ext4" "$rootimg"
fi
flock -u 9

echo "PLAYGROUND_VM_KERNEL=$kdir/vmlinuz"
echo "PLAYGROUND_VM_MODULES=$kdir/modules"
echo "PLAYGROUND_VM_ROOT=$rootimg"
