#!/usr/bin/env bash
# Installs, when missing, the Debian packages that the tests and `make dev`
# need, so that a fresh Debian machine needs no manual step.
set -euo pipefail

# command -> Debian package
declare -A want=(
	[git]=git
	[curl]=curl
	[jq]=jq
	[runc]=runc    # the oci backend's runtime
	[mkfs.ext4]=e2fsprogs # each sandbox's disk images (ext4 on a loop device)
	[nft]=nftables   # egress sandboxes' per-sandbox rulesets
	[ip]=iproute2    # egress sandboxes' veth pairs, addresses and routes
	[nsenter]=util-linux # configuring an egress sandbox's namespace from the agent
	[pgrep]=procps   # the tests' checks of which processes a sandbox runs (ps, pgrep)
	[perl]=perl-base # the hostile tenants of make soak and of the tests (a fork bomb a shell's failed fork cannot end)
	[python3]=python3 # the REPL the terminal tests type into (test/e2e TestTerminals), and a pwrite in the oci tests
)

# mkfs.ext4, nft and ip are in /sbin, which a user's PATH may lack.
PATH="$PATH:/usr/sbin:/sbin"
missing=()
for cmd in "${!want[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "prereqs: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
