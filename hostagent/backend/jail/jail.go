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

package jail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/keyedmutex"
)

// Name is the backend class.
const Name = "jail"

// Options configure a Backend. Only StateDir is required.
type Options struct {
	// StateDir holds every sandbox and pile; an absolute path on a
	// filesystem that supports file flags (UFS or ZFS).
	StateDir string
	// BaseDir is the FreeBSD userland every jail sees read-only: its
	// BaseDirs are nullfs-mounted into the jail. Default "/", the node's
	// own base system; a tree extracted from base.txz of the node's
	// release keeps the host's tools (and its /usr/local) out of reach.
	BaseDir string
	// BaseDirs are the directories of BaseDir mounted read-only. Default:
	// bin lib libexec sbin usr.
	BaseDirs []string
	// EtcFiles are the regular files of BaseDir/etc copied into each
	// jail's generated /etc when it starts; missing ones are skipped.
	// Default: DefaultEtcFiles.
	EtcFiles []string
	// DefaultResources fill in zero fields of a Spec's Resources. Default:
	// 1000 millicores, 1 GiB, 1024 processes.
	DefaultResources backend.Resources
	// PileFiles are created (empty, owned by the tenant, sappnd) in every
	// pile. Default: {"self.pile"}.
	PileFiles []string
	// DevfsRuleset is the devfs ruleset of the jails' /dev; default 4,
	// devfsrules_jail of /etc/defaults/devfs.rules.
	DevfsRuleset int
	// GuestBinary is playground-sandbox built for FreeBSD, whose reap
	// mode every command runs under: the proof of cleanup. Default:
	// backend.GuestBinaryName next to the running executable; when there is none,
	// commands run without it and Capabilities does not claim
	// ProvesCleanup. It is copied into StateDir by content hash, so
	// running jails keep the binary they started with.
	GuestBinary string
	// ZFSParent is a ZFS dataset (say zroot/playground) under which each
	// sandbox gets two of its own, for its layer and its pile, bounded in
	// bytes and files (storage.go). Empty: plain directories of StateDir,
	// and no disk limits: one sandbox can fill the node's filesystem.
	ZFSParent string
	// DefaultStorage fills in zero limits of a Spec's Storage; its own zero
	// fields default to DefaultStorage (the package variable).
	DefaultStorage backend.Storage
	// StopTimeout bounds the wait, after jail -R, for the jail to be gone
	// with all its processes; default 30s.
	StopTimeout time.Duration
	// Runner runs the tools; default ExecRunner.
	Runner Runner
}

// DefaultEtcFiles are the base system's /etc files a jail sees: what
// login classes, the dynamic linker and common tools read. Nothing with
// secrets.
var DefaultEtcFiles = []string{
	"login.conf", "login.conf.db", "libmap.conf", "localtime", "protocols",
	"services", "nsswitch.conf", "shells", "termcap.small",
}

// Backend is the jail backend. It is safe for concurrent use; lifecycle
// operations on one sandbox are serialised.
type Backend struct {
	opts Options
	run  Runner
	// guestDir holds the installed guest binary, mounted read-only at the
	// jail's guestapi.Binary's directory; empty: no reaper.
	guestDir string
	// chown is os.Lchown; tests that run unprivileged record instead.
	chown func(path string, uid, gid int) error
	// rename is os.Rename; tests refuse, as FreeBSD's rename(2) does, to
	// replace or move a flagged file.
	rename func(oldpath, newpath string) error

	// locks serialises the lifecycle operations on each sandbox.
	locks keyedmutex.Mutex

	// caps are the Capabilities, made once (Capabilities).
	caps backend.Described
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ backend.JobHolder = (*Backend)(nil)
)

// New returns a backend over opts.StateDir, creating it.
func New(opts Options) (*Backend, error) {
	if !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("jail: the state directory %q is not an absolute path", opts.StateDir)
	}
	if opts.BaseDir == "" {
		opts.BaseDir = "/"
	}
	if len(opts.BaseDirs) == 0 {
		opts.BaseDirs = []string{"bin", "lib", "libexec", "sbin", "usr"}
	}
	if opts.EtcFiles == nil {
		opts.EtcFiles = DefaultEtcFiles
	}
	r := &opts.DefaultResources
	if r.CPUMillis == 0 {
		r.CPUMillis = 1000
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = 1 << 30
	}
	if r.PIDs == 0 {
		r.PIDs = 1024
	}
	if len(opts.PileFiles) == 0 {
		opts.PileFiles = nil // the default
	}
	var err error
	if opts.PileFiles, err = backend.PileFiles(opts.PileFiles); err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	if p := opts.ZFSParent; p != "" && !zfsName.MatchString(p) {
		return nil, fmt.Errorf("jail: --jail-zfs-parent %q is not a ZFS dataset name (pool/dataset, no leading or trailing slash)", p)
	}
	if opts.DevfsRuleset == 0 {
		opts.DevfsRuleset = 4
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 30 * time.Second
	}
	if opts.Runner == nil {
		opts.Runner = ExecRunner{}
	}
	for _, d := range []string{opts.StateDir, filepath.Join(opts.StateDir, "jails"), filepath.Join(opts.StateDir, "piles")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
	}
	b := &Backend{opts: opts, run: opts.Runner, chown: os.Lchown, rename: os.Rename}
	src := opts.GuestBinary
	if src == "" {
		src = backend.GuestBinaryNextToAgent()
	}
	if src != "" {
		dir, err := installGuest(opts.StateDir, src)
		if err != nil {
			return nil, err
		}
		b.guestDir = dir
	}
	return b, nil
}

// installGuest copies the guest binary to StateDir/bin/<hash>/, once.
func installGuest(stateDir, src string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("jail: the guest binary: %w", err)
	}
	sum := sha256.Sum256(data)
	dir := filepath.Join(stateDir, "bin", hex.EncodeToString(sum[:8]))
	dst := filepath.Join(dir, backend.GuestBinaryName)
	if backend.FileExists(dst) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // dir is the state directory's, named by the binary's hash
		return "", fmt.Errorf("jail: %w", err)
	}
	if err := atomicfile.Write(dst, data, 0o555); err != nil {
		return "", fmt.Errorf("jail: installing the guest binary: %w", err)
	}
	return dir, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements backend.Backend. Cleanup is proven, and jobs are
// held in the jail (job.go), when commands run under the guest binary's
// reaper, that is when there is one. The signing key is kept in the pile
// (key.go) either way. File calls run as shell scripts through Exec
// (backend.ShellFiles): the guest's reaper in a jail serves no file
// calls (only Linux guests do), and a jail without it has no guest.
func (b *Backend) Capabilities() backend.Capabilities {
	return b.caps.Get(func() backend.Capabilities {
		c := backend.Capabilities{ProvesCleanup: b.guestDir != "", AppendOnlyPile: true, StorageReporter: b, SigningKeyHolder: backend.KeyInstaller{Name: Name, ValidateID: validateJailName, Locks: &b.locks, Install: b.installSigningKey},
			FileServer: backend.ShellFiles(b)}
		if b.guestDir != "" {
			c.JobHolder = b
		}
		return c
	})
}

var zfsName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]*(/[A-Za-z0-9_.:-]+)*$`)

// validateJailName admits the sandbox IDs of backend.ValidateID that are
// jail names too (which may not contain a dot): this backend's rule for IDs.
func validateJailName(id string) error {
	if backend.ValidateID(id) != nil || strings.Contains(id, ".") {
		return fmt.Errorf("jail: invalid sandbox ID %q: want 1-63 of [A-Za-z0-9_-], starting alphanumeric", id)
	}
	return nil
}

// jailNameOf is the jail(8) name of sandbox id.
func jailNameOf(id string) string { return "playground_" + id }

func (b *Backend) sandboxDir(id string) string { return filepath.Join(b.opts.StateDir, "jails", id) }
func (b *Backend) rootDir(id string) string    { return filepath.Join(b.sandboxDir(id), "root") }
func (b *Backend) layerDir(id string) string   { return filepath.Join(b.sandboxDir(id), "layer") }

// PileDir implements backend.Backend.
func (b *Backend) PileDir(id string) string { return filepath.Join(b.opts.StateDir, "piles", id) }

// mount is one nullfs mount of a jail, in mounting order.
type mount struct {
	src, dst string // dst is inside the jail's root
	ro       bool
}

// mounts are sandbox id's nullfs mounts, in order; devfs is jail(8)'s.
func (b *Backend) mounts(id string) []mount {
	root, layer := b.rootDir(id), b.layerDir(id)
	var ms []mount
	for _, d := range b.opts.BaseDirs {
		ms = append(ms, mount{src: filepath.Join(b.opts.BaseDir, d), dst: filepath.Join(root, d), ro: true})
	}
	if b.guestDir != "" {
		ms = append(ms, mount{src: b.guestDir, dst: filepath.Join(root, path.Dir(guestapi.Binary)), ro: true})
	}
	return append(ms,
		mount{src: filepath.Join(layer, "home"), dst: filepath.Join(root, guestapi.TenantHome)},
		mount{src: filepath.Join(layer, "workspace"), dst: filepath.Join(root, guestapi.Workspace)},
		mount{src: filepath.Join(layer, "tmp"), dst: filepath.Join(root, "tmp")},
		mount{src: b.PileDir(id), dst: filepath.Join(root, guestapi.PileDir)},
	)
}

func (b *Backend) resources(spec backend.Spec) backend.Resources {
	r, d := spec.Resources, b.opts.DefaultResources
	if r.CPUMillis == 0 {
		r.CPUMillis = d.CPUMillis
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = d.MemoryBytes
	}
	if r.PIDs == 0 {
		r.PIDs = d.PIDs
	}
	return r
}

// rctlRules are the jail's limits as rctl(8) rules, subject the jail's
// name: resident memory, processes, and CPU in percent of one core.
func rctlRules(name string, r backend.Resources) []string {
	pcpu := max(1, (r.CPUMillis+9)/10)
	return []string{
		fmt.Sprintf("jail:%s:memoryuse:deny=%d", name, r.MemoryBytes),
		fmt.Sprintf("jail:%s:maxproc:deny=%d", name, r.PIDs),
		fmt.Sprintf("jail:%s:pcpu:deny=%d", name, pcpu),
	}
}

// jailParams are the parameters of jail -c for sandbox id.
func (b *Backend) jailParams(id string) []string {
	return []string{
		"name=" + jailNameOf(id),
		"path=" + b.rootDir(id),
		"host.hostname=" + id,
		"persist",
		"vnet=new",
		"enforce_statfs=2",
		"children.max=0",
		"securelevel=3",
		"devfs_ruleset=" + strconv.Itoa(b.opts.DevfsRuleset),
		"mount.devfs",
		"allow.set_hostname=false",
		"allow.sysvipc=false",
		"allow.raw_sockets=false",
		"allow.chflags=false",
		"allow.mount=false",
		"allow.quotas=false",
		"allow.socket_af=false",
		"allow.mlock=false",
		"allow.reserved_ports=false",
	}
}

// Provision implements backend.Backend: the sandbox's directories, its
// generated /etc and its pile, the pile's files flagged sappnd. It keeps
// existing files.
func (b *Backend) Provision(ctx context.Context, spec backend.Spec) error {
	if err := validateJailName(spec.ID); err != nil {
		return err
	}
	if spec.Image != nil {
		return fmt.Errorf("%w: the jail backend runs no OCI image (a jail's userland is the node's --jail-base): remove the image, or run the sandbox on a Linux node's oci backend", backend.ErrInvalidRequest)
	}
	if len(spec.Egress) > 0 {
		return fmt.Errorf("%w: the jail backend offers network none only (a vnet jail with loopback): the Tenant's egress rules cannot be enforced here", backend.ErrInvalidRequest)
	}
	if iso := backend.IsolationOf(spec); iso != backend.IsolationContainer {
		return fmt.Errorf("%w: the jail backend runs isolation %s only, not %s", backend.ErrInvalidRequest, backend.IsolationContainer, iso)
	}
	if len(spec.Faculties) > 0 {
		return fmt.Errorf("%w: the jail backend does not install faculty bundles yet", backend.ErrInvalidRequest)
	}
	if err := backend.ValidateLogin(spec); err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalidRequest, err)
	}
	defer b.locks.Lock(spec.ID)()
	return b.provision(ctx, spec)
}

func (b *Backend) provision(ctx context.Context, spec backend.Spec) error {
	id := spec.ID
	dir := b.sandboxDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "sandbox.json"), data, 0o600); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	if err := b.ensureDatasets(ctx, spec); err != nil {
		return err
	}
	// The jail's root and its mount points, root-owned; /tmp, home and
	// workspace are the layer's, the tenant's.
	root := b.rootDir(id)
	for _, m := range b.mounts(id) {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
	}
	for _, d := range []string{"etc", "dev", "var/run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
	}
	// /var/tmp is /tmp, as in the other backends' sandboxes.
	if err := os.Symlink("/tmp", filepath.Join(root, "var", "tmp")); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("jail: %w", err)
	}
	for _, d := range []string{"home", "workspace", "tmp"} {
		p := filepath.Join(b.layerDir(id), d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		mode := os.FileMode(0o700)
		if d == "tmp" {
			mode = 0o777 | os.ModeSticky
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		if err := b.chown(p, guestapi.TenantUID, guestapi.TenantGID); err != nil {
			return fmt.Errorf("jail: giving %s to the sandbox user: %w", p, err)
		}
	}
	if err := b.writeEtc(ctx, spec); err != nil {
		return err
	}
	return b.provisionPile(ctx, id)
}

// writeEtc generates the jail's /etc: the user databases (jexec -U looks
// the sandbox user up in the jail's), the login profile, and copies of
// the base system's EtcFiles.
func (b *Backend) writeEtc(ctx context.Context, spec backend.Spec) error {
	etc := filepath.Join(b.rootDir(spec.ID), "etc")
	u, g := guestapi.TenantUID, guestapi.TenantGID
	files := map[string]string{
		// master.passwd(5): name:password:uid:gid:class:change:expire:gecos:home:shell
		"master.passwd": "root:*:0:0::0:0:Charlie &:/root:/usr/sbin/nologin\n" +
			fmt.Sprintf("%s:*:%d:%d::0:0:Playground sandbox:%s:%s\n", guestapi.TenantUser, u, g, guestapi.TenantHome, guestapi.Shell),
		"group":   fmt.Sprintf("wheel:*:0:root\n%s:*:%d:\n", guestapi.TenantUser, g),
		"profile": backend.LoginProfile(spec),
		"hosts":   "127.0.0.1 localhost " + spec.ID + "\n::1 localhost\n",
	}
	for name, content := range files {
		mode := os.FileMode(0o644)
		if name == "master.passwd" {
			mode = 0o600
		}
		if err := atomicfile.Write(filepath.Join(etc, name), []byte(content), mode); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
	}
	for _, f := range b.opts.EtcFiles {
		data, err := os.ReadFile(filepath.Join(b.opts.BaseDir, "etc", f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		if err := atomicfile.Write(filepath.Join(etc, f), data, 0o644); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
	}
	// pwd_mkdb(8) -d: the databases go in the jail's /etc, not the host's;
	// -p: /etc/passwd too.
	if _, err := b.run.Run(ctx, "pwd_mkdb", "-d", etc, "-p", filepath.Join(etc, "master.passwd")); err != nil {
		return fmt.Errorf("jail: generating the sandbox's user database: %w", err)
	}
	return nil
}

// provisionPile creates the pile and its files, owned by the tenant and
// flagged sappnd (chflags(1)): the tenant can only append to them, and
// only root outside the jail at securelevel 0 can clear the flag. The pile
// directory is root's, so the tenant creates no file of its own there.
// It touches the PileFiles only, never the signing key (New refuses its
// name among them), which keeps its owner, mode and schg flag.
func (b *Backend) provisionPile(ctx context.Context, id string) error {
	pile := b.PileDir(id)
	if err := os.MkdirAll(pile, 0o755); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	for _, name := range b.opts.PileFiles {
		p := filepath.Join(pile, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		if err := b.chown(p, guestapi.TenantUID, guestapi.TenantGID); err != nil {
			return fmt.Errorf("jail: giving %s to the sandbox user: %w", p, err)
		}
		if _, err := b.run.Run(ctx, "chflags", "sappnd", p); err != nil {
			return fmt.Errorf("jail: making the pile append-only (a filesystem without file flags?): %w", err)
		}
	}
	return nil
}

// jailInfo is a jail as jls(8) lists it.
type jailInfo struct {
	JID   string
	Path  string
	Dying bool
}

// jls looks the sandbox's jail up, dying ones included; found is false
// when there is none.
func (b *Backend) jls(ctx context.Context, id string) (info jailInfo, found bool, err error) {
	out, err := b.run.Run(ctx, "jls", "--libxo=json", "-d", "-j", jailNameOf(id), "-n", "jid", "name", "path", "dying")
	if failedWith(err, "not found") {
		return jailInfo{}, false, nil
	}
	if err != nil {
		return jailInfo{}, false, fmt.Errorf("jail: listing jail %s: %w", jailNameOf(id), err)
	}
	info, err = parseJls(out, jailNameOf(id))
	if err != nil {
		return jailInfo{}, false, fmt.Errorf("jail: listing jail %s: %w", jailNameOf(id), err)
	}
	return info, true, nil
}

// parseJls reads jls --libxo=json -n: jid is a number, or a string as
// libxo prints -n's values; dying is a boolean.
func parseJls(out []byte, name string) (jailInfo, error) {
	var doc struct {
		Info struct {
			Jails []map[string]json.RawMessage `json:"jail"`
		} `json:"jail-information"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return jailInfo{}, fmt.Errorf("unreadable jls output: %w", err)
	}
	for _, j := range doc.Info.Jails {
		if str(j["name"]) != name {
			continue
		}
		info := jailInfo{JID: str(j["jid"]), Path: str(j["path"])}
		switch strings.Trim(string(j["dying"]), `"`) {
		case "true", "1":
			info.Dying = true
		}
		return info, nil
	}
	return jailInfo{}, fmt.Errorf("jls listed no jail %s", name)
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// running says whether sandbox id's jail runs, and refuses a jail of its
// name that is not this sandbox's.
func (b *Backend) running(ctx context.Context, id string) (bool, error) {
	info, found, err := b.jls(ctx, id)
	if err != nil || !found {
		return false, err
	}
	if filepath.Clean(info.Path) != b.rootDir(id) {
		return false, fmt.Errorf("jail: a jail named %s (jid %s) runs over %s, not this sandbox's %s: remove it (jail -R %s) if it is stale", jailNameOf(id), info.JID, info.Path, b.rootDir(id), info.JID)
	}
	if info.Dying {
		return false, fmt.Errorf("jail: jail %s (jid %s) is still dying; retry once jls -d no longer lists it", jailNameOf(id), info.JID)
	}
	return true, nil
}

func (b *Backend) loadSpec(id string) (backend.Spec, error) {
	var spec backend.Spec
	if err := validateJailName(id); err != nil {
		return spec, err
	}
	data, err := os.ReadFile(filepath.Join(b.sandboxDir(id), "sandbox.json"))
	if errors.Is(err, os.ErrNotExist) {
		return spec, fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	if err != nil {
		return spec, fmt.Errorf("jail: %w", err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return spec, fmt.Errorf("jail: %s/sandbox.json: %w", b.sandboxDir(id), err)
	}
	return spec, nil
}

// Start implements backend.Backend: limits, mounts, the jail, loopback.
func (b *Backend) Start(ctx context.Context, id string) error {
	spec, err := b.loadSpec(id)
	if err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	return b.start(ctx, spec)
}

func (b *Backend) start(ctx context.Context, spec backend.Spec) error {
	id, name := spec.ID, jailNameOf(spec.ID)
	if up, err := b.running(ctx, id); err != nil || up {
		return err
	}
	// Leftovers of a jail that went without its teardown (a crash, a
	// reboot keeps none) are unmounted first, so mounts never stack.
	if err := b.unmountAll(ctx, id); err != nil {
		return err
	}
	if err := b.writeEtc(ctx, spec); err != nil {
		return err
	}
	if err := b.resetRunDir(id); err != nil {
		return err
	}
	if err := b.setLimits(ctx, name, b.resources(spec)); err != nil {
		return err
	}
	for _, m := range b.mounts(id) {
		args := []string{m.src, m.dst}
		if m.ro {
			args = []string{"-o", "ro", m.src, m.dst}
		}
		if _, err := b.run.Run(ctx, "mount_nullfs", args...); err != nil {
			return errors.Join(fmt.Errorf("jail: mounting %s: %w", m.dst, err), b.unmountAll(ctx, id))
		}
	}
	if _, err := b.run.Run(ctx, "jail", append([]string{"-c"}, b.jailParams(id)...)...); err != nil {
		return errors.Join(fmt.Errorf("jail: creating jail %s: %w", name, err), b.unmountAll(ctx, id))
	}
	// A vnet jail's lo0 starts down: network none is loopback only.
	if _, err := b.run.Run(ctx, "jexec", name, "/sbin/ifconfig", "lo0", "inet", "127.0.0.1/8", "up"); err != nil {
		return errors.Join(fmt.Errorf("jail: bringing up the loopback of jail %s: %w", name, err), b.stop(ctx, id))
	}
	return nil
}

// setLimits replaces the rctl rules of jail name. The rules name the jail,
// not its jid: added before the jail exists, they bind it from its first
// process.
func (b *Backend) setLimits(ctx context.Context, name string, r backend.Resources) error {
	if err := b.clearLimits(ctx, name); err != nil {
		return err
	}
	for _, rule := range rctlRules(name, r) {
		if _, err := b.run.Run(ctx, "rctl", "-a", rule); err != nil {
			if failedWith(err, "disabled", "not implemented", "Function not implemented") {
				return fmt.Errorf("jail: rctl is not enabled on this node: set kern.racct.enable=1 in /boot/loader.conf and reboot (docs/freebsd.md): %w", err)
			}
			return fmt.Errorf("jail: adding the rctl rule %s: %w", rule, err)
		}
	}
	return nil
}

// clearLimits removes every rule of jail name; none is no error (rctl -r
// fails with ESRCH when no rule matches).
func (b *Backend) clearLimits(ctx context.Context, name string) error {
	if _, err := b.run.Run(ctx, "rctl", "-r", "jail:"+name+":"); err != nil && !failedWith(err, "No such process") {
		return fmt.Errorf("jail: removing the rctl rules of %s: %w", name, err)
	}
	return nil
}

// unmountAll unmounts the jail's devfs and nullfs mounts, last first; a
// path that is not mounted is no error.
func (b *Backend) unmountAll(ctx context.Context, id string) error {
	ms := b.mounts(id)
	dsts := []string{filepath.Join(b.rootDir(id), "dev")}
	if b.guestDir == "" {
		// A previous agent may have mounted its guest binary.
		dsts = append(dsts, filepath.Join(b.rootDir(id), path.Dir(guestapi.Binary)))
	}
	for i := len(ms) - 1; i >= 0; i-- {
		dsts = append(dsts, ms[i].dst)
	}
	for _, d := range dsts {
		if _, err := b.run.Run(ctx, "umount", d); err != nil && !failedWith(err, "not a file system root directory", "not currently mounted", "No such file or directory") {
			return fmt.Errorf("jail: unmounting %s: %w", d, err)
		}
	}
	return nil
}

// Stop implements backend.Backend: jail -R kills every process of the
// jail; Stop returns once jls no longer lists it, dying or not, and its
// mounts are gone.
func (b *Backend) Stop(ctx context.Context, id string) error {
	if err := validateJailName(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	return b.stop(ctx, id)
}

func (b *Backend) stop(ctx context.Context, id string) error {
	name := jailNameOf(id)
	info, found, err := b.jls(ctx, id)
	if err != nil {
		return err
	}
	if found && !info.Dying {
		if filepath.Clean(info.Path) != b.rootDir(id) {
			return fmt.Errorf("jail: a jail named %s (jid %s) runs over %s, not this sandbox's %s: not removing it", name, info.JID, info.Path, b.rootDir(id))
		}
		// -R: removed as it was created, from the command line; -r would
		// read /etc/jail.conf, where an operator's entry of the same name
		// could run its exec.stop commands.
		if _, err := b.run.Run(ctx, "jail", "-R", name); err != nil && !failedWith(err, "not found") {
			return fmt.Errorf("jail: removing jail %s: %w", name, err)
		}
	}
	if found {
		deadline := time.Now().Add(b.opts.StopTimeout)
		for {
			_, still, err := b.jls(ctx, id)
			if err != nil {
				return err
			}
			if !still {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("jail: jail %s is still listed (dying) %v after jail -R: its processes may not all be gone (jls -d -j %s; ps -J %s)", name, b.opts.StopTimeout, name, name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return b.unmountAll(ctx, id)
}

// Reattach implements backend.Backend: a running jail is kept as it is,
// its rctl rules with it (both live in the kernel until a reboot, which
// neither survives); one that is not running is provisioned and started
// over its files.
func (b *Backend) Reattach(ctx context.Context, spec backend.Spec) error {
	if err := validateJailName(spec.ID); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	up, err := b.running(ctx, spec.ID)
	if err != nil {
		return err
	}
	if up {
		return nil
	}
	if err := b.provision(ctx, spec); err != nil {
		return err
	}
	return b.start(ctx, spec)
}

// Detach implements backend.Backend: the jail keeps running.
func (b *Backend) Detach(_ context.Context, id string) error { return validateJailName(id) }

// Destroy implements backend.Backend: the jail, its limits, its mounts and
// its files; the pile too unless keepPile, its flags cleared first (a
// sappnd or schg file cannot be removed).
func (b *Backend) Destroy(ctx context.Context, id string, keepPile bool) error {
	if err := validateJailName(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	if err := b.stop(ctx, id); err != nil {
		return err
	}
	if err := b.clearLimits(ctx, jailNameOf(id)); err != nil {
		return err
	}
	if b.opts.ZFSParent != "" {
		if err := b.destroyDataset(ctx, b.layerDataset(id)); err != nil {
			return err
		}
	}
	// Only after every unmount succeeded: never remove through a mount.
	if err := os.RemoveAll(b.sandboxDir(id)); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	if keepPile {
		return nil
	}
	pile := b.PileDir(id)
	if b.opts.ZFSParent != "" {
		// zfs destroy heeds no file flag.
		if err := b.destroyDataset(ctx, b.pileDataset(id)); err != nil {
			return err
		}
		if err := os.RemoveAll(pile); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		return nil
	}
	if _, err := os.Stat(pile); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := b.clearPileFlags(ctx, pile, true); err != nil {
		return err
	}
	if err := os.RemoveAll(pile); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	return nil
}
