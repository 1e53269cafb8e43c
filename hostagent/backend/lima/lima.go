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
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/keyedmutex"
)

// Name is the backend class.
const Name = "lima"

// RunAs is the unprivileged user limactl runs as when the agent is root:
// limactl refuses root ("limactl: must not run as the root user"). That
// user owns LimaHome; its VMs' processes (QEMU or vz, Lima's host agent
// and its ssh) run as it.
type RunAs struct {
	UID, GID uint32
	// Home is the user's home directory (HOME for limactl), writable:
	// Lima caches VM images in ~/.cache/lima.
	Home string
}

// Options configure the lima backend. Zero values take the defaults
// documented on each field.
type Options struct {
	// StateDir is the agent's directory for this backend: the guest
	// binary's share and each sandbox's login profile. Required, absolute.
	StateDir string
	// LimaHome is LIMA_HOME for every limactl call: the instances and
	// disks of this backend, and nothing else. Default StateDir/lima.
	// Keep it short: a sandbox's socket, LimaHome/pg-<id>/sock/agent.sock,
	// must fit a unix socket path (103 bytes).
	LimaHome string
	// Limactl is the limactl executable. Default: limactl on PATH.
	Limactl string
	// RunAs is who runs limactl; required when the agent runs as root.
	RunAs *RunAs
	// GuestBinary is the static playground-sandbox binary installed in
	// every VM. Default: backend.GuestBinaryName next to the running executable,
	// else on PATH.
	GuestBinary string
	// ImageTemplate is the base template that gives the VM its images:
	// one of Lima's image-only templates. Default
	// "template:_images/ubuntu-lts".
	ImageTemplate string
	// VMType is lima.yaml's vmType; empty is Lima's default (vz on
	// macOS 13.5+, qemu elsewhere).
	VMType string
	// DefaultCPUs and DefaultMemoryBytes size a VM whose Spec sets no
	// CPU or memory: 1 and 2 GiB.
	DefaultCPUs        int
	DefaultMemoryBytes int64
	// GuestOverheadBytes is added to a Spec's memory for the guest's own
	// kernel and services (init's service is limited to the Spec's):
	// default 512 MiB.
	GuestOverheadBytes int64
	// OSDiskBytes is added to the layer's bytes for the VM's root disk,
	// which holds the distribution too: default 8 GiB.
	OSDiskBytes int64
	// DefaultLayerBytes and DefaultPileBytes fill in zero Storage:
	// 10 GiB and 1 GiB.
	DefaultLayerBytes int64
	DefaultPileBytes  int64
	// GuestAdmin and GuestAdminUID are Lima's own user in the guest (the
	// one with passwordless sudo that limactl shell logs in as): pinned,
	// and never the tenant's uid. Default "lima", 1500.
	GuestAdmin    string
	GuestAdminUID uint32
	// PileFiles are created (empty, owned by the tenant, append-only) in
	// every pile. Default {"self.pile"}.
	PileFiles []string
	// SpareShepherds is init's -spares; default 1.
	SpareShepherds int
	// StartTimeout bounds reaching init's socket after limactl start,
	// and a command's start when the caller's context has no deadline;
	// default 30s (limactl start itself is bounded by its own --timeout
	// and the caller's context).
	StartTimeout time.Duration
}

func (o *Options) defaults() error {
	if !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("lima: state directory %q must be absolute", o.StateDir)
	}
	if o.LimaHome == "" {
		o.LimaHome = filepath.Join(o.StateDir, "lima")
	}
	if !filepath.IsAbs(o.LimaHome) {
		return fmt.Errorf("lima: LIMA_HOME %q must be absolute", o.LimaHome)
	}
	if o.Limactl == "" {
		p, err := exec.LookPath("limactl")
		if err != nil {
			return fmt.Errorf("lima: limactl is not on PATH (%v): install Lima (https://lima-vm.io) or name it with --limactl", err)
		}
		o.Limactl = p
	} else if fi, err := os.Stat(o.Limactl); err != nil {
		return fmt.Errorf("lima: limactl %s: %w: install Lima (https://lima-vm.io) or fix --limactl", o.Limactl, err)
	} else if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("lima: limactl %s is not an executable file", o.Limactl)
	}
	if os.Geteuid() == 0 && o.RunAs == nil {
		return errors.New("lima: limactl refuses to run as root (\"limactl: must not run as the root user\"): name an unprivileged user to run it as (--lima-user), who owns the Lima home")
	}
	if o.RunAs != nil && o.RunAs.UID == 0 {
		return errors.New("lima: limactl cannot run as root: name an unprivileged user")
	}
	if o.ImageTemplate == "" {
		o.ImageTemplate = "template:_images/ubuntu-lts"
	}
	setDefault(&o.DefaultMemoryBytes, 2<<30)
	setDefault(&o.GuestOverheadBytes, 512<<20)
	setDefault(&o.OSDiskBytes, 8<<30)
	setDefault(&o.DefaultLayerBytes, 10<<30)
	setDefault(&o.DefaultPileBytes, 1<<30)
	if o.DefaultCPUs <= 0 {
		o.DefaultCPUs = 1
	}
	if o.GuestAdmin == "" {
		o.GuestAdmin = "lima"
	}
	if !userName.MatchString(o.GuestAdmin) || o.GuestAdmin == guestapi.TenantUser {
		return fmt.Errorf("lima: guest admin %q is not a user name other than the tenant's", o.GuestAdmin)
	}
	if o.GuestAdminUID == 0 {
		o.GuestAdminUID = 1500
	}
	if o.GuestAdminUID < 1000 || o.GuestAdminUID == guestapi.TenantUID {
		return fmt.Errorf("lima: guest admin uid %d must be 1000 or more and not the tenant's (%d)", o.GuestAdminUID, guestapi.TenantUID)
	}
	var err error
	if o.PileFiles, err = backend.PileFiles(o.PileFiles); err != nil {
		return fmt.Errorf("lima: %w", err)
	}
	if o.SpareShepherds <= 0 {
		o.SpareShepherds = 1
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	return nil
}

func setDefault(v *int64, d int64) {
	if *v <= 0 {
		*v = d
	}
}

var userName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// guestDir is the host directory Lima mounts read-only at guestShare: it
// holds the guest binary and nothing else.
func (o *Options) guestDir() string { return filepath.Join(o.StateDir, "guest") }

// Backend runs sandboxes as Lima instances. Safe for concurrent use.
type Backend struct {
	opts Options
	lctl *limactl

	// locks serialises the lifecycle operations on each sandbox.
	locks keyedmutex.Mutex

	// caps are the Capabilities, made once (Capabilities).
	caps backend.Described
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Dialer  = (*Backend)(nil)
)

// New checks opts, finds limactl and stages the guest binary where the
// VMs' share reads it.
func New(opts Options) (*Backend, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("lima: %w", err)
	}
	if err := stageGuest(&opts); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.LimaHome, 0o755); err != nil {
		return nil, fmt.Errorf("lima: %w", err)
	}
	l := &limactl{path: opts.Limactl, home: opts.LimaHome}
	if opts.RunAs != nil {
		// limactl writes LIMA_HOME as that user.
		if err := os.Chown(opts.LimaHome, int(opts.RunAs.UID), int(opts.RunAs.GID)); err != nil {
			return nil, fmt.Errorf("lima: handing the Lima home to uid %d: %w", opts.RunAs.UID, err)
		}
		l.cred, l.userDir = credOf(opts.RunAs), opts.RunAs.Home
	}
	if err := checkVersion(l); err != nil {
		return nil, err
	}
	return &Backend{opts: opts, lctl: l}, nil
}

// checkVersion runs limactl --version as the backend will run limactl
// (its user, in its home): it fails now, with the reason, rather than at
// the first sandbox. Lima 2 is needed (the lima.yaml's fields and base
// templates); a version that is not a release number (a development
// build) is taken as recent.
func checkVersion(l *limactl) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := l.run(ctx, nil, "--version")
	if err != nil {
		return fmt.Errorf("lima: %w (does the Lima user reach %s?)", err, l.home)
	}
	// cobra's template: "limactl version 2.0.0".
	v := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(v, ' '); i >= 0 {
		v = v[i+1:]
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	if n, err := strconv.Atoi(major); err == nil && n < 2 {
		return fmt.Errorf("lima: limactl %s is version %s: the lima backend needs Lima 2 or later", l.path, v)
	}
	return nil
}

// credOf is who limactl runs as: r, without supplementary groups.
func credOf(r *RunAs) *syscall.Credential {
	return &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: []uint32{}}
}

// stageGuest copies the guest binary into the share (a directory of its
// own, world-readable: the VM's hypervisor runs as RunAs), atomically.
func stageGuest(o *Options) error {
	src := o.GuestBinary
	if src == "" {
		p, err := backend.FindGuestBinary()
		if err != nil {
			return fmt.Errorf("lima: %w", err)
		}
		src = p
		o.GuestBinary = src
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("lima: guest binary: %w", err)
	}
	dir := o.guestDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lima: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("lima: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, guestBinaryName), data, 0o755); err != nil {
		return fmt.Errorf("lima: staging the guest binary: %w", err)
	}
	return nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements backend.Backend. Cleanup is proven by init's
// shepherds in the guest, as everywhere. The pile is append-only inside
// the guest: ext4 on the sandbox's own Lima disk, chattr +a set by root at
// every boot, and the tenant (uid 1000, no capabilities, no sudo, under
// NoNewPrivileges) cannot clear it; nor the signing key's chattr +i
// (key.go). See docs/lima.md for what of this was verified. File calls
// run as shell scripts through Exec (backend.ShellFiles): Lima's guest is
// the Linux guest that serves them, but this backend is tested against a
// fake guest only (its contract), which runs commands and nothing more,
// so it keeps the path that is tested.
func (b *Backend) Capabilities() backend.Capabilities {
	return b.caps.Get(func() backend.Capabilities {
		return backend.Capabilities{ProvesCleanup: true, AppendOnlyPile: true, Dialer: b, JobHolder: guestexec.Holder{Shepherd: b.jobConn}, SigningKeyHolder: backend.KeyInstaller{Name: "lima", ValidateID: validateLimaName, Locks: &b.locks, Install: b.installSigningKey},
			FileServer: backend.ShellFiles(b), Guest: b.guest()}
	})
}

// InstanceName is the Lima instance of sandbox id.
func InstanceName(id string) string { return "pg-" + id }

// pileDiskName is the Lima disk that holds sandbox id's pile.
func pileDiskName(id string) string { return "pg-" + id + "-pile" }

// limaID is Lima's rule for instance and disk names
// (pkg/identifiers: alphanumerics separated by single . _ or -, at most
// 76), which is stricter than a sandbox ID's.
var limaID = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

// validateLimaName admits the sandbox IDs of backend.ValidateID that are
// Lima names too: this backend's rule for IDs.
func validateLimaName(id string) error {
	if backend.ValidateID(id) != nil || !limaID.MatchString(id) {
		return fmt.Errorf("lima: invalid sandbox ID %q: the lima backend needs 1-63 alphanumerics separated by single '.', '_' or '-' (Lima's rule for instance names)", id)
	}
	return nil
}

// validateSpec refuses what this backend cannot run as asked.
func (b *Backend) validateSpec(spec backend.Spec) error {
	if err := validateLimaName(spec.ID); err != nil {
		return err
	}
	if iso := backend.IsolationOf(spec); iso != backend.IsolationContainer {
		return fmt.Errorf("lima: sandbox %s asks for isolation %q; a Lima sandbox is a virtual machine and offers no other", spec.ID, iso)
	}
	if spec.Image != nil {
		return fmt.Errorf("lima: sandbox %s names an image, which a Lima sandbox does not run (its system is the Lima VM's): remove the image, or use the oci backend", spec.ID)
	}
	if len(spec.Egress) > 0 {
		// The VM's only network is Lima's user-mode network (slirp, or
		// vz's NAT), which reaches the host's own loopback services too
		// (the host at 192.168.5.2): init's network namespace has
		// loopback only, and nothing here filters a way out of it.
		return fmt.Errorf("lima: sandbox %s asks for egress, but lima sandboxes have network none only: Lima's user-mode network cannot be limited to the Tenant's CIDRs and ports here (use the oci backend with --network=egress)", spec.ID)
	}
	if len(spec.Faculties) > 0 {
		return fmt.Errorf("lima: sandbox %s asks for faculties, which the lima backend does not install yet (a Lima mount is fixed at limactl create): use the oci backend", spec.ID)
	}
	for _, e := range spec.LoginEnv {
		if !backend.IsEnvName(e.Name) {
			return fmt.Errorf("lima: login variable %q is not a valid name", e.Name)
		}
	}
	if p := b.hostSocket(spec.ID); len(p) > maxSocketPath {
		return fmt.Errorf("lima: sandbox %s: its socket %s is %d bytes, over the %d a unix socket path may have: give the agent a shorter --lima-home", spec.ID, p, len(p), maxSocketPath)
	}
	return nil
}

// instanceDir is where Lima keeps instance id: $LIMA_HOME/<name>
// (pkg/limatype/dirnames).
func (b *Backend) instanceDir(id string) string {
	return filepath.Join(b.opts.LimaHome, InstanceName(id))
}

// hostSocket is init's socket as Lima forwards it to the host.
func (b *Backend) hostSocket(id string) string {
	return filepath.Join(b.instanceDir(id), hostSocketRel)
}

// profilePath is the host copy of sandbox id's login profile, pushed
// into the guest at every start and reattach.
func (b *Backend) profilePath(id string) string {
	return filepath.Join(b.opts.StateDir, "profiles", id+".sh")
}

// PileDir implements backend.Backend: the directory of the Lima disk
// holding the pile ($LIMA_HOME/_disks/<disk>). The pile's files are inside
// that disk's ext4, seen from the guest only.
func (b *Backend) PileDir(id string) string {
	return filepath.Join(b.opts.LimaHome, "_disks", pileDiskName(id))
}

// inspect is the instance of sandbox id: ErrNotFound when Lima has none,
// an error naming the fix when it is Broken.
func (b *Backend) inspect(ctx context.Context, id string) (*instance, error) {
	inst, err := b.lctl.list(ctx, InstanceName(id))
	if err != nil {
		return nil, fmt.Errorf("lima: sandbox %s: %w", id, err)
	}
	if inst == nil {
		return nil, fmt.Errorf("lima: sandbox %s (instance %s): %w", id, InstanceName(id), backend.ErrNotFound)
	}
	if inst.Status == statusBroken {
		return nil, fmt.Errorf("lima: sandbox %s: instance %s is %s (%s): see limactl list %s and its ha.stderr.log in %s; destroy the sandbox to start over", id, inst.Name, inst.Status, strings.Join(inst.Errors, "; "), inst.Name, inst.Dir)
	}
	return inst, nil
}

// Provision implements backend.Backend: the pile's disk (kept from an
// earlier incarnation if there is one) and the instance, created
// stopped. An existing instance is kept as it is: its lima.yaml, like its
// disks' sizes, was fixed when it was created.
func (b *Backend) Provision(ctx context.Context, spec backend.Spec) error {
	if err := b.validateSpec(spec); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	if err := b.writeProfile(spec); err != nil {
		return err
	}
	if _, err := b.inspect(ctx, spec.ID); err == nil {
		return nil
	} else if !errors.Is(err, backend.ErrNotFound) {
		return err
	}
	disk := pileDiskName(spec.ID)
	d, err := b.lctl.disk(ctx, disk)
	if err != nil {
		return fmt.Errorf("lima: sandbox %s: %w", spec.ID, err)
	}
	if d == nil {
		size := mib(b.opts.sizes(spec).pileBytes)
		if _, err := b.lctl.run(ctx, nil, "disk", "create", disk, "--size", size); err != nil {
			return fmt.Errorf("lima: sandbox %s: creating the pile's disk: %w", spec.ID, err)
		}
	} else if d.Instance != "" && d.Instance != InstanceName(spec.ID) {
		return fmt.Errorf("lima: sandbox %s: its pile's disk %s is attached to instance %s", spec.ID, disk, d.Instance)
	}
	config, err := b.opts.generate(spec, disk)
	if err != nil {
		return fmt.Errorf("lima: sandbox %s: lima.yaml: %w", spec.ID, err)
	}
	if _, err := b.lctl.run(ctx, config, "create", "--name="+InstanceName(spec.ID), "-"); err != nil {
		return fmt.Errorf("lima: sandbox %s: %w", spec.ID, err)
	}
	return nil
}

func (b *Backend) writeProfile(spec backend.Spec) error {
	p := b.profilePath(spec.ID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("lima: %w", err)
	}
	if err := atomicfile.Write(p, []byte(backend.LoginProfile(spec)), 0o600); err != nil {
		return fmt.Errorf("lima: login profile: %w", err)
	}
	return nil
}

// Start implements backend.Backend: limactl start (which returns once
// Lima's readiness probe sees init's socket; a running instance is left
// as it is), the login profile and any signing key staged while it was
// stopped pushed, and init reached through the forwarded socket.
func (b *Backend) Start(ctx context.Context, id string) error {
	if err := validateLimaName(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	if _, err := b.inspect(ctx, id); err != nil {
		return err
	}
	if _, err := b.lctl.run(ctx, nil, "start", InstanceName(id)); err != nil {
		return fmt.Errorf("lima: sandbox %s: %w", id, err)
	}
	return b.attach(ctx, id)
}

// attach pushes the login profile and the staged signing key, if there
// is one, and waits until init accepts on the forwarded socket.
func (b *Backend) attach(ctx context.Context, id string) error {
	if err := b.pushProfile(ctx, id); err != nil {
		return err
	}
	if err := b.installStagedKey(ctx, id); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	for {
		c, err := b.dial(wctx, id)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("lima: sandbox %s: init does not answer on %s after %v (%v): see sudo journalctl -u %s in the guest (limactl shell %s)", id, b.hostSocket(id), b.opts.StartTimeout, err, unitName, InstanceName(id))
		case <-time.After(retryDelay):
		}
	}
}

// profileScript installs the login profile from its standard input.
const profileScript = "cat > " + profileFile + ".tmp && chmod 0644 " + profileFile + ".tmp && mv -f " + profileFile + ".tmp " + profileFile

// pushProfile writes the login profile into the guest as root, through
// limactl shell (ssh as Lima's user, who has sudo).
func (b *Backend) pushProfile(ctx context.Context, id string) error {
	data, err := os.ReadFile(b.profilePath(id))
	if errors.Is(err, os.ErrNotExist) {
		data = []byte(backend.LoginProfile(backend.Spec{ID: id}))
	} else if err != nil {
		return fmt.Errorf("lima: %w", err)
	}
	_, err = b.lctl.run(ctx, data, "shell", "--workdir", "/", InstanceName(id), "sudo", "sh", "-c", profileScript)
	if err != nil {
		return fmt.Errorf("lima: sandbox %s: writing the login profile: %w", id, err)
	}
	return nil
}

// Reattach implements backend.Backend: a running instance is taken over
// (its processes keep running; the new login profile is pushed), a
// stopped one is ErrNotRunning (the agent starts it), a missing one
// ErrNotFound, a broken one an error.
func (b *Backend) Reattach(ctx context.Context, spec backend.Spec) error {
	if err := b.validateSpec(spec); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	inst, err := b.inspect(ctx, spec.ID)
	if err != nil {
		return err
	}
	if err := b.writeProfile(spec); err != nil {
		return err
	}
	if inst.Status != statusRunning {
		return fmt.Errorf("lima: sandbox %s is %s: %w", spec.ID, inst.Status, backend.ErrNotRunning)
	}
	return b.attach(ctx, spec.ID)
}

// Detach implements backend.Backend. The VM keeps running, so the
// tenant's background processes survive between sessions.
func (b *Backend) Detach(ctx context.Context, id string) error {
	if err := validateLimaName(id); err != nil {
		return err
	}
	_, err := b.inspect(ctx, id)
	return err
}

// Stop implements backend.Backend: limactl stop shuts the VM down, so no
// process of the sandbox is left; a stopped instance stays stopped.
func (b *Backend) Stop(ctx context.Context, id string) error {
	if err := validateLimaName(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	inst, err := b.inspect(ctx, id)
	if err != nil {
		return err
	}
	if inst.Status == statusStopped {
		return nil
	}
	if _, err := b.lctl.run(ctx, nil, "stop", InstanceName(id)); err != nil {
		return fmt.Errorf("lima: sandbox %s: %w", id, err)
	}
	return nil
}

// Destroy implements backend.Backend: limactl delete --force (the VM is
// killed if it runs), then the pile's disk unless keepPile, and with it
// any signing key staged for the pile (a kept pile keeps it, for its
// next start). Destroying a sandbox that does not exist succeeds.
func (b *Backend) Destroy(ctx context.Context, id string, keepPile bool) error {
	if err := validateLimaName(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	inst, err := b.lctl.list(ctx, InstanceName(id))
	if err != nil {
		return fmt.Errorf("lima: sandbox %s: %w", id, err)
	}
	if inst != nil {
		if _, err := b.lctl.run(ctx, nil, "delete", "--force", InstanceName(id)); err != nil {
			return fmt.Errorf("lima: sandbox %s: %w", id, err)
		}
	}
	if !keepPile {
		d, err := b.lctl.disk(ctx, pileDiskName(id))
		if err != nil {
			return fmt.Errorf("lima: sandbox %s: %w", id, err)
		}
		if d != nil {
			// --force: a disk still listed as referenced by a
			// non-running instance is otherwise skipped with a mere
			// warning and exit 0.
			if _, err := b.lctl.run(ctx, nil, "disk", "delete", "--force", d.Name); err != nil {
				return fmt.Errorf("lima: sandbox %s: deleting the pile's disk: %w", id, err)
			}
		}
		if err := b.dropStagedKey(id); err != nil {
			return err
		}
	}
	if err := os.Remove(b.profilePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lima: %w", err)
	}
	return nil
}
