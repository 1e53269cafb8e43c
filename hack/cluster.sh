#!/usr/bin/env bash
# A single-node Kubernetes on this machine, made of the real parts, for
# `make cluster-e2e` (docs/cluster-e2e.md):
#
#   hack/cluster.sh up       start it (prints the kubeconfig's path)
#   hack/cluster.sh down     stop everything `up` started and undo its changes
#   hack/cluster.sh status   say what runs
#   hack/cluster.sh import ARCHIVE...
#                            import image archives (OCI or Docker) into the
#                            node's containerd, as an image pull would
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy (iptables mode) are built from the Go module proxy by
# hack/cluster-binaries.sh; containerd, runc and the CNI plugins come from
# Debian (apt-get install containerd containernetworking-plugins). No image
# registry is reachable, so the pause image and a busybox test image are made
# here from local files (hack/cluster/) and imported; there is no CoreDNS.
#
# Everything lives under CLUSTER_DIR (default bin/cluster): containerd has a
# private config, root, state and socket; the kubelet a private root dir and
# cgroup root (/playground-cluster); CNI a private conflist and IPAM dir; the
# bridge is pgcni0. What cannot be private (the bridge, iptables chains,
# sysctls the kubelet and the bridge plugin set, cgroups) is recorded by `up`
# and undone by `down`. Root is needed (as for any kubelet).
#
# Environment: CLUSTER_IMAGES (image archives to import; by default
# bin/playground-image.oci.tar when make image has made it), CLUSTER_DIR, CLUSTER_API_PORT (16443), CLUSTER_NODE
# (playground-node), CLUSTER_POD_CIDR (10.88.0.0/24), CLUSTER_SERVICE_CIDR
# (10.96.0.0/16).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${CLUSTER_DIR:-$root/bin/cluster}
api_port=${CLUSTER_API_PORT:-16443}
node=${CLUSTER_NODE:-playground-node}
pod_cidr=${CLUSTER_POD_CIDR:-10.88.0.0/24}
svc_cidr=${CLUSTER_SERVICE_CIDR:-10.96.0.0/16}
svc_ip=${svc_cidr%.*/*}.1
bridge=pgcni0
cgroup_root=playground-cluster
etcd_port=12379
sock=$dir/containerd/containerd.sock
sandbox_image=playground.local/pause:cluster
test_image=playground.local/busybox:cluster
# The kubelet and kube-proxy write these; `up` saves and `down` restores them.
sysctls=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes net/ipv4/ip_forward
	net/ipv4/conf/all/route_localnet net/bridge/bridge-nf-call-iptables)
# Host directories that containerd 1.6 and libcni use whatever the config
# says (the shims' sockets, ctr's fifos, CNI results): `down` removes those
# that `up` created, when empty.
host_dirs=(/run/containerd/s /run/containerd/fifo /run/containerd/runc /run/containerd
	/var/lib/cni/results /var/lib/cni)
# Stopped in this order by `down`.
components=(kube-proxy kubelet containerd kube-scheduler kube-controller-manager kube-apiserver etcd)

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

pidof_component() {
	local f=$dir/run/$1.pid
	[ -f "$f" ] || return 1
	local pid
	pid=$(cat "$f")
	# The pid is ours only while its executable is still the one we started.
	[ -d "/proc/$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(cat "$dir/run/$1.exe")" ] || return 1
	echo "$pid"
}

start() { # name binary args...
	local name=$1 bin
	bin=$(command -v "$2")
	shift 2
	log "starting $name"
	setsid "$bin" "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/run/$name.pid"
	readlink -f "$bin" >"$dir/run/$name.exe"
}

wait_for() { # what seconds command...
	local what=$1 secs=$2
	shift 2
	local i
	local c f
	for ((i = 0; i < secs * 5; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		# Fail at once when a component has exited (a port in use, a bad flag).
		for f in "$dir"/run/*.pid; do
			[ -e "$f" ] || continue
			c=$(basename "$f" .pid)
			pidof_component "$c" >/dev/null || die "$c exited while waiting for $what; $dir/logs/$c.log says:$(echo; tail -n 5 "$dir/logs/$c.log")"
		done
		sleep 0.2
	done
	die "timed out after ${secs}s waiting for $what (logs in $dir/logs)"
}

host_ip() { ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p'; }

# --- certificates -----------------------------------------------------------

cert() { # name CN O [SANs]
	local name=$1 cn=$2 o=$3 sans=${4:-}
	local p=$dir/pki
	[ -f "$p/$name.crt" ] && return 0
	openssl genrsa -out "$p/$name.key" 2048 2>/dev/null
	local subj="/CN=$cn"
	[ -n "$o" ] && subj="/O=$o/CN=$cn"
	openssl req -new -key "$p/$name.key" -subj "$subj" -out "$p/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$sans" ]; then
			echo "extendedKeyUsage=serverAuth,clientAuth"
			echo "subjectAltName=$sans"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$p/$name.ext"
	openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
		-days 365 -sha256 -extfile "$p/$name.ext" -out "$p/$name.crt" 2>/dev/null
	rm -f "$p/$name.csr" "$p/$name.ext"
}

# The apiserver listens on the host's IP only: pods reach it there through
# the kubernetes Service, and so do the components.
kubeconfig() { # name cert ip
	local kc=$dir/$1.kubeconfig
	cat >"$kc" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: playground
  cluster:
    certificate-authority: $dir/pki/ca.crt
    server: https://$3:$api_port
users:
- name: $1
  user:
    client-certificate: $dir/pki/$2.crt
    client-key: $dir/pki/$2.key
contexts:
- name: playground
  context: {cluster: playground, user: $1}
current-context: playground
EOF
}

pki() {
	local p=$dir/pki ip=$1
	mkdir -p "$p"
	if [ ! -f "$p/ca.crt" ]; then
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" \
			-days 365 -subj "/CN=playground-cluster-ca" 2>/dev/null
	fi
	[ -f "$p/sa.key" ] || {
		openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
		openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
	}
	# The serving certificate names the host's IP: remake it if that changed.
	if [ "$(cat "$p/apiserver.ip" 2>/dev/null)" != "$ip" ]; then
		rm -f "$p/apiserver.crt"
		echo "$ip" >"$p/apiserver.ip"
	fi
	cert apiserver kube-apiserver "" \
		"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$ip,IP:$svc_ip"
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
	cert admin admin system:masters
	cert controller-manager system:kube-controller-manager ""
	cert scheduler system:kube-scheduler ""
	cert kubelet "system:node:$node" system:nodes
	cert kube-proxy system:kube-proxy ""
	kubeconfig admin admin "$ip"
	kubeconfig controller-manager controller-manager "$ip"
	kubeconfig scheduler scheduler "$ip"
	kubeconfig kubelet kubelet "$ip"
	kubeconfig kube-proxy kube-proxy "$ip"
}

# --- images -----------------------------------------------------------------

images() {
	local d=$dir/images
	mkdir -p "$d"
	if [ ! -f "$d/pause.tar" ] || [ ! -f "$d/busybox.tar" ]; then
		log "making the pause and busybox images"
		(cd "$root/hack/cluster" &&
			CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$d/pause" ./pause &&
			go build -o "$d/images" ./images)
		if [ ! -x "$d/busybox/bin/busybox" ]; then
			# Debian's static busybox, unpacked here rather than installed on the host.
			(cd "$d" && rm -f busybox-static_*.deb && apt-get download busybox-static >/dev/null &&
				dpkg-deb -x busybox-static_*.deb busybox && rm -f busybox-static_*.deb)
		fi
		"$d/images" -name "$sandbox_image" -out "$d/pause.tar" -entrypoint /pause /pause="$d/pause"
		"$d/images" -name "$test_image" -out "$d/busybox.tar" -entrypoint /bin/sh \
			/pause="$d/pause" /bin/busybox="$d/busybox/bin/busybox" "/bin/sh->busybox"
	fi
	ctr -a "$sock" -n k8s.io images import "$d/pause.tar" >/dev/null
	ctr -a "$sock" -n k8s.io images import "$d/busybox.tar" >/dev/null
	# The Playground image of make image, when it has been built.
	local a
	for a in ${CLUSTER_IMAGES-$(ls "$root/bin/playground-image.oci.tar" 2>/dev/null)}; do
		log "importing $a"
		ctr -a "$sock" -n k8s.io images import "$a" >/dev/null
	done
}

# --- configuration ----------------------------------------------------------

configs() {
	local ip=$1
	mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam" "$dir/kubelet"
	cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
oom_score = 0

[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$sandbox_image"
  # This machine's root lacks CAP_SYS_RESOURCE: runc cannot lower a
  # process's oom_score_adj below its own, and the kubelet asks for -998 for
  # the sandbox. Clamp to what is allowed instead of failing in runc init
  # (docs/cluster-e2e.md).
  restrict_oom_score_adj = true
  # The pods' network namespaces under our state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
EOF
	cat >"$dir/cni/net.d/10-playground.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "playground-cluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1 (hybrid): allowed, with the cgroupfs driver.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_root
containerRuntimeEndpoint: unix://$sock
address: $ip
port: 20250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 20248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
# Without CAP_SYS_RESOURCE the kubelet cannot lower its own oom_score_adj.
oomScoreAdj: 0
failSwapOn: false
# The disk is shared with other work: do not evict or taint for it.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No CoreDNS (no registry to pull it from): pods get the host's resolv.conf.
resolvConf: /etc/resolv.conf
serializeImagePulls: false
EOF
	cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
hostnameOverride: $node
clusterCIDR: $pod_cidr
bindAddress: 127.0.0.1
metricsBindAddress: 127.0.0.1:20249
healthzBindAddress: 127.0.0.1:20256
iptables: {localhostNodePorts: false}
# Leave the host's conntrack sysctls as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# --- up ---------------------------------------------------------------------

up() {
	[ "$(id -u)" = 0 ] || die "needs root (a kubelet does)"
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	if [ ${#missing[@]} -gt 0 ]; then
		# On a systemd host this also starts the system's containerd, which
		# ours does not share anything with.
		log "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
	local running
	running=$(status_lines | grep -c ' running' || true)
	[ "$running" = 0 ] || die "already up ($running processes); run: hack/cluster.sh down"

	# A failed up leaves nothing behind either.
	trap 'log "up failed; undoing it (logs in $dir/logs)"; down' EXIT
	local t0=$SECONDS bins ip
	bins=$("$root/hack/cluster-binaries.sh")
	ip=$(host_ip)
	[ -n "$ip" ] || die "no host IP (no default route)"
	mkdir -p "$dir/logs" "$dir/run"
	pki "$ip"
	configs "$ip"

	# What the kubelet, the bridge plugin and kube-proxy change on the host.
	if [ ! -f "$dir/run/sysctls" ]; then
		for s in "${sysctls[@]}"; do
			[ -f "/proc/sys/$s" ] && echo "$s $(cat "/proc/sys/$s")"
		done >"$dir/run/sysctls"
	fi
	if [ ! -f "$dir/run/host-dirs" ]; then
		for d in "${host_dirs[@]}"; do [ -e "$d" ] || echo "$d"; done >"$dir/run/host-dirs"
	fi
	for h in /sys/fs/cgroup/*/; do
		[ "$h" = /sys/fs/cgroup/unified/ ] && continue
		mkdir -p "$h$cgroup_root"
	done

	start etcd "$bins/etcd" --name playground --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
		--initial-cluster "playground=http://127.0.0.1:$((etcd_port + 1))" \
		--unsafe-no-fsync --quota-backend-bytes 1073741824
	start containerd containerd --config "$dir/containerd/config.toml"
	wait_for etcd 30 curl -fsS "http://127.0.0.1:$etcd_port/health"

	local p=$dir/pki
	start kube-apiserver "$bins/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address "$ip" --advertise-address "$ip" --secure-port "$api_port" \
		--service-cluster-ip-range "$svc_cidr" \
		--client-ca-file "$p/ca.crt" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
		--kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--authorization-mode Node,RBAC --allow-privileged=true
	wait_for kube-apiserver 90 "$bins/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz

	start kube-controller-manager "$bins/kube-controller-manager" \
		--kubeconfig "$dir/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 20257 --leader-elect=false \
		--use-service-account-credentials --service-account-private-key-file "$p/sa.key" \
		--root-ca-file "$p/ca.crt" --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
		--service-cluster-ip-range "$svc_cidr"
	start kube-scheduler "$bins/kube-scheduler" \
		--kubeconfig "$dir/scheduler.kubeconfig" \
		--authentication-kubeconfig "$dir/scheduler.kubeconfig" \
		--authorization-kubeconfig "$dir/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 20259 --leader-elect=false

	wait_for containerd 30 ctr -a "$sock" version
	images

	start kubelet "$bins/kubelet" --config "$dir/kubelet/config.yaml" \
		--kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$dir/kubelet/root" \
		--hostname-override "$node" --node-ip "$ip"
	start kube-proxy "$bins/kube-proxy" --config "$dir/kube-proxy.yaml"

	wait_for "node $node Ready" 120 "$bins/kubectl" --kubeconfig "$dir/admin.kubeconfig" \
		wait --for=condition=Ready "node/$node" --timeout=1s
	# The default ServiceAccount, which pods need, comes from the controller-manager.
	wait_for "the default ServiceAccount" 60 "$bins/kubectl" --kubeconfig "$dir/admin.kubeconfig" \
		get serviceaccount default
	trap - EXIT
	log "up in $((SECONDS - t0))s; kubectl --kubeconfig $dir/admin.kubeconfig"
	echo "$dir/admin.kubeconfig"
}

# --- down -------------------------------------------------------------------

stop() { # name
	local pid
	pid=$(pidof_component "$1") || { rm -f "$dir/run/$1.pid"; return 0; }
	log "stopping $1 ($pid)"
	kill -TERM "$pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 50; i++)); do
		[ -d "/proc/$pid" ] || break
		sleep 0.2
	done
	if [ -d "/proc/$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	for ((i = 0; i < 25; i++)); do
		[ -d "/proc/$pid" ] || break
		sleep 0.2
	done
	rm -f "$dir/run/$1.pid"
}

# The containerd shims of our containerd: they outlive it by design. Found by
# the -address they were given, our private socket.
shim_pids() {
	local p
	for p in /proc/[0-9]*; do
		if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "containerd-shim.* -address $sock "; then
			echo "${p#/proc/}"
		fi
	done
	return 0
}

down() {
	local bins=$root/bin/k8s/1.37.2-node kc=$dir/admin.kubeconfig
	# Pods first, through the kubelet, so that CNI DEL releases their
	# addresses and iptables rules.
	if pidof_component kubelet >/dev/null && pidof_component kube-apiserver >/dev/null; then
		log "deleting all pods"
		"$bins/kubectl" --kubeconfig "$kc" delete pods --all --all-namespaces --grace-period=1 --wait=false >/dev/null 2>&1 || true
		local i
		for ((i = 0; i < 60; i++)); do
			[ -z "$(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null)" ] && break
			sleep 1
		done
	fi
	stop kube-proxy
	[ -x "$bins/kube-proxy" ] && "$bins/kube-proxy" --cleanup >/dev/null 2>&1 || true
	stop kubelet
	# Whatever containers are left (the kubelet had no time to stop them).
	if pidof_component containerd >/dev/null; then
		local t c
		for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr -a "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
		done
		sleep 1
		for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr -a "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
		done
		for c in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do
			ctr -a "$sock" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
		done
	fi
	stop containerd
	local pid
	for pid in $(shim_pids); do
		log "killing containerd shim $pid"
		kill -KILL "$pid" 2>/dev/null || true
	done
	for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$c"; done

	# Mounts: the kubelet's volumes, containerd's rootfs, shm and netns.
	local m
	for ((i = 0; i < 3; i++)); do
		m=$(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
		[ -z "$m" ] && break
		for mp in $m; do umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true; done
	done

	# The bridge, and the iptables chains of the bridge plugin (CNI-*), the
	# portmap plugin (CNI-*) and the kubelet and kube-proxy (KUBE-*).
	if ip link show "$bridge" >/dev/null 2>&1; then ip link delete "$bridge"; fi
	local tbl
	for tbl in filter nat mangle; do
		iptables_cleanup "$tbl"
	done
	# The CNI plugins' result cache for our network (libcni's, not configurable).
	rm -rf /var/lib/cni/results/playground-cluster-* 2>/dev/null || true

	# A fresh cluster each time: the state goes, the certificates and images
	# stay. Only with nothing mounted under it, so that rm cannot reach
	# through a bind mount into the host.
	if awk -v d="$dir/" 'index($2, d) == 1 {found = 1} END {exit !found}' /proc/self/mounts; then
		log "mounts are left under $dir; keeping its state:"
		awk -v d="$dir/" 'index($2, d) == 1 {print "  " $2}' /proc/self/mounts >&2
	else
		rm -rf --one-file-system "$dir/etcd" "$dir/containerd/root" "$dir/containerd/state" \
			"$dir/containerd/runc" "$dir/containerd/opt" "$dir/kubelet/root" "$dir/cni/ipam"
	fi

	if [ -f "$dir/run/sysctls" ]; then
		local s v
		while read -r s v; do
			[ "$(cat "/proc/sys/$s" 2>/dev/null)" = "$v" ] || echo "$v" >"/proc/sys/$s" 2>/dev/null ||
				log "could not restore $s to $v"
		done <"$dir/run/sysctls"
		rm -f "$dir/run/sysctls"
	fi
	if [ -f "$dir/run/host-dirs" ]; then
		local d
		while read -r d; do
			rmdir "$d"/* 2>/dev/null || true
			rmdir "$d" 2>/dev/null || true
		done <"$dir/run/host-dirs"
		rm -f "$dir/run/host-dirs"
	fi
	# Our cgroup root, innermost first.
	local h
	for h in /sys/fs/cgroup/*/"$cgroup_root"; do
		find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		if [ -d "$h" ]; then log "cgroup $h is left (processes in it?)"; fi
	done
	if status_lines | grep ' running'; then die "something is still running"; fi
	log "down"
}

# iptables_cleanup TABLE: drop the rules that jump to CNI-* or KUBE-* chains
# from the built-in chains, then flush and delete those chains.
iptables_cleanup() {
	local t=$1 rule chains c
	{ iptables -t "$t" -S 2>/dev/null || true; } | { grep -E '^-A [A-Z]+ .*-j (CNI|KUBE)-' || true; } |
		while read -r rule; do
			eval "iptables -t $t ${rule/-A/-D}" 2>/dev/null || true
		done
	chains=$(iptables -t "$t" -S 2>/dev/null | sed -n 's/^-N \(\(CNI\|KUBE\)-[^ ]*\)$/\1/p')
	for c in $chains; do iptables -t "$t" -F "$c" 2>/dev/null || true; done
	for c in $chains; do iptables -t "$t" -X "$c" 2>/dev/null || true; done
}

# --- status -----------------------------------------------------------------

status_lines() {
	local c pid
	for c in "${components[@]}"; do
		if pid=$(pidof_component "$c"); then echo "$c $pid running"; else echo "$c stopped"; fi
	done
	for pid in $(shim_pids); do echo "containerd-shim $pid running"; done
	return 0
}

status() {
	status_lines
	if pidof_component kube-apiserver >/dev/null; then
		"$root/bin/k8s/1.37.2-node/kubectl" --kubeconfig "$dir/admin.kubeconfig" get nodes,pods -A -o wide 2>&1 || true
	fi
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
import)
	shift
	[ $# -gt 0 ] || die "usage: $0 import ARCHIVE..."
	pidof_component containerd >/dev/null || die "the cluster is not up (hack/cluster.sh up)"
	for a in "$@"; do
		log "importing $a"
		ctr -a "$sock" -n k8s.io images import "$a" >/dev/null
	done
	;;
*) die "usage: $0 up|down|status|import ARCHIVE..." ;;
esac
