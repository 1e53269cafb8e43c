#!/usr/bin/env bash
# CI's walk of the user's path (make smoke): starts `playground-dev` on a
# fresh temporary state directory and a free port, runs hack/smoke.sh with
# the cancellation proof against the endpoint and token it prints, then with
# the isolation checks; applies a gVisor Tenant and a vm Tenant (the VM under
# TCG where KVM does not work) and runs both against each of them; serves a
# registry on loopback with an image built from this machine's files
# (hack/crane.sh, hack/smoke-image.sh) and runs them against a Tenant on
# that image on runc, gVisor and vm, checking its os-release; checks
# that the metrics endpoint it prints counts the calls and that a wrong
# token fails the smoke test, then stops dev with SIGINT (as
# Ctrl-C does) and checks that it exits 0 and leaves no runc container, mount and
# no process behind. Everything it started is stopped and its temporary
# directory removed, whatever happens.
#
# Needs bin/playground-dev and bin/playground-sandbox (make build), the control
# plane (hack/controlplane.sh, make envtest), runc, curl and jq (make
# prereqs). Environment:
#   DEV_SMOKE_READY_TIMEOUT  seconds to wait for dev to be ready (default 300)
#   DEV_SMOKE_STOP_TIMEOUT   seconds to wait for dev to stop (default 120)
#   DEV_SMOKE_KEEP=1         keep the temporary directory (state and dev.log)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
READY_TIMEOUT=${DEV_SMOKE_READY_TIMEOUT:-300}
STOP_TIMEOUT=${DEV_SMOKE_STOP_TIMEOUT:-120}
READY_LINE="Playground dev is running."

log() { echo "dev-smoke: $*"; }
die() {
	echo "dev-smoke: $*" >&2
	exit 1
}

for b in bin/playground-dev bin/playground-sandbox; do
	[ -x "$b" ] || die "$b is missing: run 'make build' (or 'make smoke', which builds it)"
done
for c in runc curl jq; do
	command -v "$c" >/dev/null 2>&1 || die "$c is missing: run 'make prereqs' (or: sudo apt-get install -y $c)"
done
controlplane=$(hack/controlplane.sh)
# The stronger isolations (make smoke builds their parts): gVisor's runsc
# and the vm backend's kernel, modules and root image.
runsc=$(hack/runsc.sh)
# The image tenants' registry (crane registry serve) and their image.
crane=$(hack/crane.sh)
eval "$(hack/vm-image.sh)"
export PLAYGROUND_VM_KERNEL PLAYGROUND_VM_MODULES PLAYGROUND_VM_ROOT

# The state directory's parents must be traversable by the sandboxes'
# unprivileged users (their bundles are under it), hence 0711.
work=$(mktemp -d "${TMPDIR:-/tmp}/playground-dev-smoke.XXXXXX")
chmod 0711 "$work"
state=$work/state
devlog=$work/dev.log
(umask 077 && : >"$devlog") # it will hold the tenant's token
dev_pid=""
registry_pid=""

# redact: the tenant's token (pgt_ and base64url) never reaches the output.
redact() { sed -u -e 's/pgt_[A-Za-z0-9_-]*/pgt_<redacted>/g'; }

# processes_of_state: pid and command line of every process whose command
# line names the state directory (awk reads it from the environment, so that
# it does not match itself).
processes_of_state() {
	ps -eo pid=,args= | STATE="$state" awk 'index($0, ENVIRON["STATE"]) { print }'
}

# show_log [N]: the last N lines of dev's output, redacted.
show_log() {
	echo "dev-smoke: the last ${1:-60} lines of playground-dev's output:"
	tail -n "${1:-60}" "$devlog" | redact | sed 's/^/  dev | /'
}

# stop_dev: SIGINT, as Ctrl-C; SIGKILL after STOP_TIMEOUT. Sets dev_rc.
dev_rc=""
stop_dev() {
	[ -n "$dev_pid" ] || return 0
	local deadline=$((SECONDS + STOP_TIMEOUT))
	kill -INT "$dev_pid" 2>/dev/null || true
	while kill -0 "$dev_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 1; done
	if kill -0 "$dev_pid" 2>/dev/null; then
		echo "dev-smoke: playground-dev did not stop within ${STOP_TIMEOUT}s of SIGINT; killing it" >&2
		kill -KILL "$dev_pid" 2>/dev/null || true
	fi
	dev_rc=0
	wait "$dev_pid" || dev_rc=$?
	dev_pid=""
}

# shellcheck disable=SC2317 # called by the trap
cleanup() {
	local rc=$?
	set +e
	trap - INT TERM
	if [ -n "$dev_pid" ]; then
		echo "dev-smoke: stopping playground-dev" >&2
		stop_dev
		echo "dev-smoke: playground-dev exited with status $dev_rc" >&2
	fi
	# What a failed stop left: processes naming our state directory (ours,
	# by their pids) and runc containers under our runc root.
	[ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null
	local pids
	pids=$(processes_of_state | awk '{ print $1 }')
	if [ -n "$pids" ]; then
		echo "dev-smoke: killing leftover processes of this run: $(tr '\n' ' ' <<<"$pids")" >&2
		# shellcheck disable=SC2086 # one pid a word
		kill -KILL $pids 2>/dev/null
		sleep 1
	fi
	if [ -d "$state/node/runc" ]; then
		local id
		for id in $(runc --root "$state/node/runc" list -q 2>/dev/null); do
			echo "dev-smoke: deleting leftover runc container $id" >&2
			runc --root "$state/node/runc" delete -f "$id" 2>/dev/null
		done
	fi
	if [ "${DEV_SMOKE_KEEP:-0}" = 1 ]; then
		echo "dev-smoke: kept $work (it holds the tenant's token in dev.log)" >&2
	elif grep -qF " $work" /proc/self/mountinfo; then
		echo "dev-smoke: not removing $work: something is mounted under it" >&2
		grep -F " $work" /proc/self/mountinfo >&2
	else
		# The sandboxes' piles (directories and files) are append-only
		# (chattr +a): clear that first.
		find "$work" -xdev \( -type f -o -type d \) -exec chattr -a {} + 2>/dev/null
		rm -rf --one-file-system "$work" || echo "dev-smoke: could not remove all of $work" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "dev-smoke: interrupted" >&2; exit 130' INT TERM

# --- start playground-dev --------------------------------------------------------

log "starting playground-dev (state in $state)"
# A background job of a script ignores SIGINT; playground-dev's signal handler
# takes it back (Go's signal.Notify does), so SIGINT stops it as Ctrl-C does.
bin/playground-dev --control-plane "$controlplane" --state-dir "$state" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --runsc "$runsc" >"$devlog" 2>&1 &
dev_pid=$!

deadline=$((SECONDS + READY_TIMEOUT))
shown=0
while :; do
	# dev's progress, as it comes
	lines=$(wc -l <"$devlog")
	if [ "$lines" -gt "$shown" ]; then
		# (without the stack trace controller-runtime prints about its logger)
		sed -n "$((shown + 1)),${lines}p" "$devlog" | { grep -v -e '^[[:space:]]*>' || true; } | redact | sed 's/^/  dev | /'
		shown=$lines
	fi
	if grep -qxF "$READY_LINE" "$devlog" && grep -q '^  token:' "$devlog" && grep -q '^  MCP endpoint:' "$devlog"; then
		break
	fi
	if ! kill -0 "$dev_pid" 2>/dev/null; then
		rc=0
		wait "$dev_pid" || rc=$?
		dev_pid=""
		show_log
		die "playground-dev exited with status $rc before it was ready"
	fi
	if [ $SECONDS -ge $deadline ]; then
		show_log
		die "playground-dev was not ready after ${READY_TIMEOUT}s"
	fi
	sleep 1
done
# The lines after the ready line arrive in one write; give them a moment.
sleep 1
endpoint=$(sed -n 's/^  MCP endpoint: *\([^ ]*\).*/\1/p' "$devlog" | tail -n 1)
token=$(sed -n 's/^  token: *\([^ ]*\).*/\1/p' "$devlog" | tail -n 1)
if [ -z "$endpoint" ] || [ -z "$token" ]; then
	show_log
	die "cannot find the MCP endpoint and the token in playground-dev's output"
fi
log "playground-dev is ready: $endpoint"

# --- the smoke test ------------------------------------------------------------------

failures=()
echo
log "hack/smoke.sh --endpoint $endpoint --cancel-proof"
smoke_rc=0
PLAYGROUND_TOKEN=$token hack/smoke.sh --endpoint "$endpoint" --cancel-proof 2>&1 | redact || smoke_rc=$?
if [ $smoke_rc -ne 0 ]; then
	failures+=("hack/smoke.sh failed (status $smoke_rc)")
fi

# The same against a tenant of each stronger isolation that this machine
# offers: gVisor (hack/runsc.sh) and a VM (hack/vm-image.sh; TCG here), each
# with the isolation checks (its own kernel, a file of the node's that it
# must not see, lo only, the pile append-only); and tenants on an image of
# their own, on runc, gVisor and vm, whose /etc/os-release is the image's.
marker=$work/node-only-marker
echo "a file of the node's" >"$marker"
echo
log "hack/smoke.sh --endpoint $endpoint --isolation (the demo tenant: container)"
iso_rc=0
PLAYGROUND_TOKEN=$token hack/smoke.sh --endpoint "$endpoint" --isolation --not-visible "$marker" 2>&1 | redact || iso_rc=$?
[ $iso_rc -eq 0 ] || failures+=("hack/smoke.sh --isolation failed for the container tenant (status $iso_rc)")
read -r kubectl kubeconfig < <(sed -n 's/^  kubectl: *\([^ ]*\) --kubeconfig \([^ ]*\).*/\1 \2/p' "$devlog" | tail -n 1)
kc() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }
# The image tenants' image, from this machine's files, in a registry on
# loopback (which dev reaches in cleartext).
image=""
"$crane" registry serve --address 127.0.0.1:0 >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 50); do
	port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
	[ -z "$port" ] || break
	sleep 0.2
done
if [ -n "$port" ] && image=$(hack/smoke-image.sh "$crane" "127.0.0.1:$port" smoke/system:v1); then
	log "the image tenants run $image (built from this machine's files)"
else
	cat "$work/registry.log" >&2
	failures+=("the smoke image could not be served and pushed")
fi
declare -A stronger=() flags=()
stronger[smoke-gvisor]='{"backend":"oci","isolation":"gvisor"}'
flags[smoke-gvisor]="--other-kernel"
stronger[smoke-vm]='{"backend":"vm","resources":{"cpu":"1","memory":"512Mi"}}'
flags[smoke-vm]="--other-kernel"
if [ -n "$image" ]; then
	stronger[smoke-image]='{"image":{"reference":"'$image'"}}'
	flags[smoke-image]="--os-release playground-smoke"
	stronger[smoke-image-gvisor]='{"backend":"oci","isolation":"gvisor","image":{"reference":"'$image'"}}'
	flags[smoke-image-gvisor]="--other-kernel --os-release playground-smoke"
	stronger[smoke-image-vm]='{"backend":"vm","resources":{"cpu":"1","memory":"512Mi"},"image":{"reference":"'$image'"}}'
	flags[smoke-image-vm]="--other-kernel --os-release playground-smoke"
fi
for tenant in "${!stronger[@]}"; do
	printf '{"apiVersion":"playground.dev/v1alpha1","kind":"Tenant","metadata":{"name":"%s","namespace":"default"},"spec":{"persona":"%s","sandbox":%s}}' \
		"$tenant" "$tenant" "${stronger[$tenant]}" | kc apply -f - >/dev/null
done
for tenant in "${!stronger[@]}"; do
	echo
	log "tenant $tenant (${stronger[$tenant]}): waiting for it to be Ready"
	if ! kc wait --for=condition=Ready "tenant/$tenant" -n default --timeout=300s >/dev/null; then
		kc get tenant,sandbox -n default -o wide 2>&1 | sed 's/^/  /'
		failures+=("tenant $tenant did not become Ready")
		continue
	fi
	secret=$(kc get tenant "$tenant" -n default -o jsonpath='{.status.credentials.secretRef.name}')
	ttoken=$(kc get secret "$secret" -n default -o jsonpath='{.data.token}' | base64 -d)
	log "hack/smoke.sh --endpoint $endpoint --cancel-proof --isolation ${flags[$tenant]} (tenant $tenant)"
	rc=0
	# shellcheck disable=SC2086 # the flags are words
	PLAYGROUND_TOKEN=$ttoken hack/smoke.sh --endpoint "$endpoint" --cancel-proof --isolation ${flags[$tenant]} --not-visible "$marker" 2>&1 | redact || rc=$?
	[ $rc -eq 0 ] || failures+=("hack/smoke.sh failed for tenant $tenant (status $rc)")
done

# The metrics the banner prints: the gateway counted the smoke test's calls.
echo
metrics=$(sed -n 's/^  metrics: *\(http[^ ]*\).*/\1/p' "$devlog" | tail -n 1)
# The page is read whole before it is searched: with pipefail, `curl | grep -q`
# fails whenever grep finds its line and leaves before curl has written the
# rest of a page larger than a pipe (curl: (23) Failure writing output).
scrape=""
[ -z "$metrics" ] || scrape=$(curl -fsS "$metrics") || scrape=""
if grep -q '^playground_gateway_tool_calls_total{.*tool="exec".*} [1-9]' <<<"$scrape"; then
	log "PASS  the metrics at $metrics count the smoke test's exec calls"
else
	log "FAIL  the metrics ${metrics:-(none printed)} do not count the smoke test's exec calls"
	failures+=("the metrics endpoint")
fi

# A smoke test that passes with a wrong token proves nothing: it must fail.
echo
log "negative control: hack/smoke.sh with a wrong token must fail"
neg_rc=0
neg_out=$(PLAYGROUND_TOKEN="pgt_wrong-$RANDOM$RANDOM" hack/smoke.sh --endpoint "$endpoint" 2>&1) || neg_rc=$?
printf '%s\n' "$neg_out" | redact | sed 's/^/  | /'
if [ $neg_rc -eq 1 ] && grep -q '^FAIL  initialize: HTTP 401' <<<"$neg_out"; then
	log "PASS  a wrong token fails the smoke test (status 1, initialize refused with 401)"
else
	log "FAIL  a wrong token: want hack/smoke.sh to fail (status 1) at initialize with 401, got status $neg_rc"
	failures+=("the smoke test did not fail with a wrong token")
fi

# --- stop, as Ctrl-C, and check that nothing is left -------------------------------

echo
log "stopping playground-dev with SIGINT"
stop_dev
sed -n "$((shown + 1)),\$p" "$devlog" | { grep -e '^==>' -e '^playground' || true; } | redact | sed 's/^/  dev | /'
if [ "$dev_rc" = 0 ]; then
	log "PASS  playground-dev exited 0"
else
	show_log 40
	log "FAIL  playground-dev exited with status $dev_rc"
	failures+=("playground-dev exited with status $dev_rc")
fi

containers=$(runc --root "$state/node/runc" list -q 2>&1) || containers="runc list failed: $containers"
if [ -z "$containers" ]; then
	log "PASS  no runc container left (runc --root $state/node/runc list -q is empty)"
else
	log "FAIL  runc containers left: $(tr '\n' ' ' <<<"$containers")"
	failures+=("runc containers left behind")
fi

# Give exiting processes a moment to be reaped before calling them leftovers.
for _ in 1 2 3 4 5; do
	left=$(processes_of_state)
	[ -n "$left" ] || break
	sleep 1
done
if [ -z "$left" ]; then
	log "PASS  no process left that names $state"
else
	log "FAIL  processes left that name $state:"
	printf '%s\n' "$left" | sed 's/^/  /'
	failures+=("processes left behind")
fi

mounts=$(STATE="$state/" awk 'index($5, ENVIRON["STATE"]) == 1 { print $5 }' /proc/self/mountinfo)
if [ -z "$mounts" ]; then
	log "PASS  nothing left mounted under $state"
else
	log "FAIL  left mounted under $state: $(tr '\n' ' ' <<<"$mounts")"
	failures+=("mounts left behind")
fi

# The sandboxes' cgroups (the oci backend's default parent is
# playground/<first 12 hex of sha256 of its state directory>) hold no process.
hash=$(printf '%s' "$state/node" | sha256sum | cut -c1-12)
procs=$(find /sys/fs/cgroup -maxdepth 6 -path "*/playground/$hash/*" -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l)
if [ "$procs" -eq 0 ]; then
	log "PASS  no process left in the sandboxes' cgroups (playground/$hash)"
else
	log "FAIL  $procs processes left in the sandboxes' cgroups (playground/$hash)"
	failures+=("processes left in the sandboxes' cgroups")
fi

echo
if [ ${#failures[@]} -eq 0 ]; then
	log "passed"
	exit 0
fi
log "FAILED: $(printf '%s; ' "${failures[@]}" | sed 's/; $//')"
exit 1
