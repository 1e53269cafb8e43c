//go:build linux

/*
Copyright 2026 The Playground Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package lima

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// The lima.yaml this backend generates. Field names and meanings are
// Lima's (pkg/limatype/lima_yaml.go, templates/default.yaml); only what is
// set here is written, everything else keeps Lima's builtin default.
type limaYAML struct {
	// MinimumLimaVersion: base templates and the field set used here are
	// Lima 2's.
	MinimumLimaVersion string   `json:"minimumLimaVersion"`
	Base               []string `json:"base"`
	VMType             string   `json:"vmType,omitempty"`
	CPUs               int      `json:"cpus"`
	Memory             string   `json:"memory"`
	Disk               string   `json:"disk"`
	AdditionalDisks    []disk   `json:"additionalDisks"`
	// Mounts is the guest binary's directory only: Lima's default
	// template would mount the home directory, which base: does not pull
	// in here (template:_images/* holds images only).
	Mounts            []mount       `json:"mounts"`
	Containerd        containerd    `json:"containerd"`
	User              limaUser      `json:"user"`
	SSH               ssh           `json:"ssh"`
	UpgradePackages   bool          `json:"upgradePackages"`
	PropagateProxyEnv bool          `json:"propagateProxyEnv"`
	Provision         []provision   `json:"provision"`
	Probes            []probe       `json:"probes"`
	PortForwards      []portForward `json:"portForwards"`
}

type disk struct {
	Name   string `json:"name"`
	Format bool   `json:"format"`
	FSType string `json:"fsType"`
}

type mount struct {
	Location   string `json:"location"`
	MountPoint string `json:"mountPoint"`
	Writable   bool   `json:"writable"`
}

type containerd struct {
	System bool `json:"system"`
	User   bool `json:"user"`
}

type limaUser struct {
	Name string `json:"name"`
	UID  uint32 `json:"uid"`
}

type ssh struct {
	LoadDotSSHPubKeys bool `json:"loadDotSSHPubKeys"`
	ForwardAgent      bool `json:"forwardAgent"`
	ForwardX11        bool `json:"forwardX11"`
}

type provision struct {
	Mode   string `json:"mode"`
	Script string `json:"script"`
}

type probe struct {
	Mode        string `json:"mode"`
	Description string `json:"description"`
	Script      string `json:"script"`
}

type portForward struct {
	GuestSocket       string `json:"guestSocket,omitempty"`
	HostSocket        string `json:"hostSocket,omitempty"`
	GuestIP           string `json:"guestIP,omitempty"`
	GuestIPMustBeZero *bool  `json:"guestIPMustBeZero,omitempty"`
	GuestPortRange    []int  `json:"guestPortRange,omitempty"`
	Proto             string `json:"proto,omitempty"`
	Ignore            bool   `json:"ignore,omitempty"`
}

// Paths of the guest side, fixed by this backend.
const (
	// guestShare is where the guest binary's host directory is mounted,
	// read-only; the provision script copies the binary out of it and
	// init's namespace does not see it.
	guestShare = "/.playground-host"
	// guestBinaryName is the file in the share.
	guestBinaryName = "playground-sandbox"
	// guestSocket is init's socket in the guest (guestapi.RunDir/SocketName).
	guestSocket = guestapi.RunDir + "/" + guestapi.SocketName
	// hostSocketRel is where Lima forwards guestSocket, in the instance
	// directory ("Put sockets into {{.Dir}}/sock", default.yaml).
	hostSocketRel = "sock/" + guestapi.SocketName
	// unitName is the systemd service that runs init in the guest.
	unitName = "playground-sandbox.service"
	// profileFile is the login profile that /etc/profile sources.
	profileFile = "/etc/profile.d/zz-playground.sh"
	// maxSocketPath is the longest unix socket path both Linux (108 with
	// the NUL) and macOS (104) bind; Lima's ssh -L binds the host side.
	maxSocketPath = 103
)

// resources are what the VM and init's service are given.
type resources struct {
	cpus        int
	vmMemory    int64 // the VM's memory
	serviceMem  int64 // MemoryMax of init's service; 0 none
	pids        int64 // TasksMax; 0 none
	cpuQuotaPct int64 // CPUQuota in percent; 0 none
	diskBytes   int64 // the VM's root disk
	pileBytes   int64
	layerBytes  int64
}

// sizes resolves spec's resources against the backend's defaults.
func (o *Options) sizes(spec backend.Spec) resources {
	r := resources{cpus: o.DefaultCPUs, vmMemory: o.DefaultMemoryBytes}
	if m := spec.Resources.CPUMillis; m > 0 {
		r.cpus = int((m + 999) / 1000)
		r.cpuQuotaPct = (m + 9) / 10
	}
	if m := spec.Resources.MemoryBytes; m > 0 {
		r.serviceMem = m
		r.vmMemory = m + o.GuestOverheadBytes
	}
	r.pids = spec.Resources.PIDs
	r.layerBytes = spec.Storage.LayerBytes
	if r.layerBytes <= 0 {
		r.layerBytes = o.DefaultLayerBytes
	}
	r.diskBytes = r.layerBytes + o.OSDiskBytes
	r.pileBytes = spec.Storage.PileBytes
	if r.pileBytes <= 0 {
		r.pileBytes = o.DefaultPileBytes
	}
	return r
}

// mib rounds n up to whole MiB, in the form go-units.RAMInBytes (Lima's
// parser for memory and disk) reads.
func mib(n int64) string {
	return strconv.FormatInt((n+(1<<20)-1)>>20, 10) + "MiB"
}

// generate is the lima.yaml of sandbox spec, whose pile is the Lima disk
// pileDisk.
func (o *Options) generate(spec backend.Spec, pileDisk string) ([]byte, error) {
	r := o.sizes(spec)
	no := false
	y := limaYAML{
		MinimumLimaVersion: "2.0.0",
		Base:               []string{o.ImageTemplate},
		VMType:             o.VMType,
		CPUs:               r.cpus,
		Memory:             mib(r.vmMemory),
		Disk:               mib(r.diskBytes),
		AdditionalDisks:    []disk{{Name: pileDisk, Format: true, FSType: "ext4"}},
		Mounts:             []mount{{Location: o.guestDir(), MountPoint: guestShare, Writable: false}},
		Containerd:         containerd{System: false, User: false},
		User:               limaUser{Name: o.GuestAdmin, UID: o.GuestAdminUID},
		Provision:          []provision{{Mode: "system", Script: o.provisionScript(spec, r, pileDisk)}},
		Probes: []probe{{
			Mode:        "readiness",
			Description: "playground-sandbox init to listen on " + guestSocket,
			// Probes run as the Lima user, who may traverse the run
			// directory (its group) but not the tenant.
			Script: "#!/bin/sh\nfor i in $(seq 120); do [ -S " + guestSocket + " ] && exit 0; sleep 1; done\necho 'playground-sandbox init is not listening; see: sudo journalctl -u " + unitName + "' >&2\nexit 1\n",
		}},
		PortForwards: []portForward{
			{GuestSocket: guestSocket, HostSocket: "{{.Dir}}/" + hostSocketRel},
			// Nothing else: Lima would otherwise forward every port a
			// guest process binds on 127.0.0.1 to the host's loopback.
			{GuestIP: "0.0.0.0", GuestIPMustBeZero: &no, GuestPortRange: []int{1, 65535}, Proto: "any", Ignore: true},
		},
	}
	return yaml.Marshal(y)
}

// provisionScript runs as root on every boot, after Lima has mounted the
// share and the pile disk and before the readiness probe: it makes the VM
// a sandbox and starts init. It is idempotent.
func (o *Options) provisionScript(spec backend.Spec, r resources, pileDisk string) string {
	var limits []string
	if r.serviceMem > 0 {
		limits = append(limits, "MemoryMax="+strconv.FormatInt(r.serviceMem, 10), "MemorySwapMax=0")
	}
	if r.pids > 0 {
		limits = append(limits, "TasksMax="+strconv.FormatInt(r.pids, 10))
	}
	if r.cpuQuotaPct > 0 {
		limits = append(limits, "CPUQuota="+strconv.FormatInt(r.cpuQuotaPct, 10)+"%")
	}
	pileFiles := make([]string, len(o.PileFiles))
	for i, f := range o.PileFiles {
		pileFiles[i] = backend.ShellQuote(f)
	}
	return fmt.Sprintf(provisionTemplate,
		backend.ShellQuote(spec.ID),
		backend.ShellQuote(guestShare+"/"+guestBinaryName),
		guestapi.TenantUser, guestapi.TenantUID, guestapi.TenantGID, guestapi.TenantHome, guestapi.Workspace, guestapi.PileDir,
		backend.ShellQuote("/mnt/lima-"+pileDisk),
		strings.Join(pileFiles, " "),
		o.SpareShepherds,
		unitName,
		o.GuestAdmin,
		strings.Join(limits, "\n"),
		guestShare,
		guestapi.SigningKeyFile,
	)
}

// provisionTemplate: see provisionScript. Its parts, in order: the tenant
// user (and the proof that it has no sudo), the guest binary, the
// tenant's directories, the pile, the namespace entry script, the unit.
const provisionTemplate = `#!/bin/bash
# Playground: make this Lima VM sandbox %[1]s (root, every boot).
set -eu -o pipefail
share=%[2]s sharedir=%[15]s
tuser=%[3]s tuid=%[4]d tgid=%[5]d thome=%[6]s
workspace=%[7]s pilemnt=%[8]s piledisk=%[9]s

# The tenant: uid 1000, its own group, no other group, no sudo. Lima's
# own user (a different uid) keeps its passwordless sudo; the tenant
# never runs as it.
getent group "$tgid" >/dev/null || groupadd --gid "$tgid" "$tuser"
getent passwd "$tuid" >/dev/null || useradd --uid "$tuid" --gid "$tgid" --no-user-group --home-dir "$thome" --shell /bin/sh "$tuser"
if [ "$(id -un "$tuid")" != "$tuser" ]; then
  echo "uid $tuid is $(id -un "$tuid"), not $tuser: refusing to run the tenant as another account" >&2
  exit 1
fi
for g in $(id -Gn "$tuser"); do
  [ "$g" = "$(id -gn "$tuser")" ] || gpasswd -d "$tuser" "$g" >/dev/null
done
# Lima's user reaches init's socket through its group: never the tenant's.
if [ "$(id -g %[13]s)" = "$tgid" ] || id -Gn "$tuser" | grep -qw "$(id -gn %[13]s)"; then
  echo "the tenant shares a group with Lima's user %[13]s: refusing" >&2
  exit 1
fi
if sudo -n -l -U "$tuser" 2>/dev/null | grep -q 'may run'; then
  echo "$tuser may run sudo in this VM: remove it from sudoers" >&2
  exit 1
fi

# The guest binary, from the read-only share, owned by root.
install -d -m 0755 -o root -g root /.playground /.playground/bin
install -m 0755 -o root -g root "$share" /.playground/bin/playground-sandbox.new
mv -f /.playground/bin/playground-sandbox.new /.playground/bin/playground-sandbox
# init makes the run directory 0700 and its socket 0600; Lima's ssh
# forward connects as Lima's user, so the socket is handed to that
# user's group once init listens (the unit's ExecStartPost).
install -d -m 0700 -o root -g root /.playground/run

install -d -m 0755 -o "$tuid" -g "$tgid" "$thome" "$workspace"
install -d -m 1777 -o root -g root /var/lib/playground-tmp

# The pile: a directory on Lima's disk $piledisk, owned by root and
# append-only; its files the tenant's and append-only, but the signing
# key, the tenant's, 0400 and immutable (InstallSigningKey, key.go): left
# as it is, or sealed again should an install have been cut short between
# its rename and its flag. The tenant has no CAP_LINUX_IMMUTABLE, so it
# cannot clear either flag.
if ! mountpoint -q "$piledisk"; then
  echo "the pile's disk is not mounted at $piledisk" >&2
  exit 1
fi
pile="$piledisk/pile"
install -d -m 0755 -o root -g root "$pile"
chattr -a "$pile"
for f in %[10]s; do
  [ -e "$pile/$f" ] || [ -L "$pile/$f" ] || : > "$pile/$f"
done
find "$pile" -mindepth 1 -type d -print0 | while IFS= read -r -d '' d; do
  chattr -a "$d"; chown root:root "$d"; chmod 0755 "$d"; chattr +a "$d"
done
key="$pile/%[16]s"
find "$pile" -type f -print0 | while IFS= read -r -d '' f; do
  [ "$f" != "$key" ] || continue
  chattr -a "$f"; chown "$tuid:$tgid" "$f"; chmod 0644 "$f"; chattr +a "$f"
done
if [ -f "$key" ] && [ ! -L "$key" ]; then
  attrs=$(lsattr -d -- "$key"); attrs=${attrs%%%% *}
  case "$attrs" in
  *i*) ;;
  *) chattr -a "$key"; chown "$tuid:$tgid" "$key"; chmod 0400 "$key"; chattr +i "$key" ;;
  esac
fi
chattr +a "$pile"

# The entry script runs in the new namespaces, as root, before init.
cat > /.playground/bin/enter <<ENTER
#!/bin/sh
set -eu
# Nothing of the host, nor Lima's cloud-init data (the VM's user-data,
# keys and settings) nor Lima's disk root (its lost+found), in here.
umount -l "$sharedir" 2>/dev/null || true
umount -l /mnt/lima-cidata 2>/dev/null || true
mount --bind "$pile" "$pilemnt"
umount -l "$piledisk"
mount --bind /var/lib/playground-tmp /tmp
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
exec /.playground/bin/playground-sandbox init -spares %[11]d
ENTER
chmod 0755 /.playground/bin/enter
install -d -m 0755 "$pilemnt"

cat > /etc/systemd/system/%[12]s <<UNIT
[Unit]
Description=Playground sandbox init (PID 1 of the tenant's namespaces)
[Service]
Type=simple
ExecStartPre=/bin/rm -f /.playground/run/agent.sock
ExecStart=/usr/bin/unshare --pid --fork --mount-proc --mount --propagation private /.playground/bin/enter
# Network none: a namespace of its own with loopback only, up (systemd
# does it, before the address families are restricted).
PrivateNetwork=yes
# Once init listens, Lima's user (not the tenant) may reach its socket.
ExecStartPost=/bin/sh -c 'for i in \$\$(seq 300); do [ -S /.playground/run/agent.sock ] && break; sleep 0.1; done; g=\$\$(id -gn %[13]s); chgrp "\$\$g" /.playground/run /.playground/run/agent.sock && chmod 0710 /.playground/run && chmod 0660 /.playground/run/agent.sock'
# No setuid program (sudo, su) raises a tenant process; sockets of the
# families a sandbox needs only (no AF_VSOCK to the hypervisor's host, no
# netlink, no packet); system calls of the native ABI only (int 0x80 on
# amd64 is killed). All inherited by init and every tenant process.
NoNewPrivileges=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
SystemCallArchitectures=native
KillMode=control-group
Restart=always
RestartSec=1
%[14]s
UNIT
systemctl daemon-reload
systemctl restart %[12]s
`
