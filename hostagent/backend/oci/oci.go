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

package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/keyedmutex"
)

// DefaultEtcFiles are the host /etc entries a sandbox sees by default:
// what the dynamic linker, TLS, time zones and common tools need. Nothing
// with secrets (shadow, ssh keys, ssl/private, credentials) is listed.
var DefaultEtcFiles = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl/certs", "ca-certificates", "ca-certificates.conf",
	"localtime", "timezone", "os-release", "debian_version",
	"protocols", "services", "mime.types", "inputrc", "bash.bashrc",
	"terminfo", "gai.conf", "host.conf",
}

// idMapSize is the number of IDs mapped into every sandbox.
const idMapSize = 65536

// Backend is the oci backend. It is safe for concurrent use; lifecycle
// operations on one sandbox are serialised, Exec calls are not.
type Backend struct {
	opts         Options
	runc         *runc
	gvisor       *runc    // runsc; nil without Options.GVisorRuntime
	guestBin     string   // installed guest binary (inside StateDir)
	baseDirs     []string // BaseDirs to bind-mount
	baseLinks    map[string]string
	etcBinds     []string
	maskedPaths  []string // what runc hides inside every sandbox
	cgroupParent string
	swapLimit    bool

	// sharedMu serialises making and removing the snapshots of what
	// sandboxes share, and guards shared, the last one taken (overlay.go).
	sharedMu sync.Mutex
	shared   struct {
		name string
		etc  []string
		seen time.Time // when the node's entries last had its fingerprint
	}

	mu sync.Mutex
	// locks serialises the lifecycle operations on each sandbox.
	locks     keyedmutex.Mutex
	lifelines map[string]*lifeline
	// starts counts, per sandbox, the inits this process started.
	starts backend.StartCount
	// slots are the ID-map slots in use and their sandboxes, read from
	// the sandboxes' files on first use (loadSlots), then kept there.
	slots backend.Slots
	// loops maps an image to the loop device last attached or found for
	// it (under mu): a hint that saves searching every loop device of the
	// node when the image is mounted again (disk.go).
	loops map[string]string

	// pool is the warm pool, nil without Options.WarmPool (pool.go).
	pool *pool
	// cpu is the CPU of the sandboxes' ended containers (usage.go).
	cpu cpuLedger

	// imageMu serialises mounting and unmounting images (image.go);
	// imageSystems are the mounted images' systems, by digest.
	imageMu      sync.Mutex
	imageSystems map[string]system
	// caps are the Capabilities, made once (Capabilities).
	caps backend.Described
}

// lifeline is one incarnation of a sandbox's container as seen by the
// commands started in it. When Destroy tears the container down, the
// commands' connections break without an Exit frame; the lifeline tells
// them whether that teardown proved every process gone (runc removed the
// container's cgroup, which it can only do once it is empty).
type lifeline struct {
	tearingDown atomic.Bool
	ended       chan struct{} // closed when the teardown finished
	err         error         // the teardown's error; read after ended

	// oomFile is the container's memory cgroup file that counts OOM kills
	// (cgroup v1 memory.oom_control, v2 memory.events); empty if unknown.
	oomOnce sync.Once
	oomFile string
	// pidsFile is the container's pids cgroup file that counts the forks
	// its limit refused (pids.events); empty if unknown.
	pidsOnce sync.Once
	pidsFile string
}

// pidsRefused returns how many forks the sandbox's process limit has
// refused during this incarnation, if the kernel says.
func (l *lifeline) pidsRefused(r *runc, id string) (uint64, bool) {
	l.pidsOnce.Do(func() { l.pidsFile = r.pidsCounter(containerID(id)) })
	return backend.CgroupCount(l.pidsFile, "max ")
}

// oomKills returns how many processes the OOM killer has killed in the
// sandbox's memory cgroup during this incarnation, if the kernel says.
func (l *lifeline) oomKills(r *runc, id string) (uint64, bool) {
	l.oomOnce.Do(func() { l.oomFile = r.oomCounter(containerID(id)) })
	return backend.CgroupCount(l.oomFile, "oom_kill ")
}

// lifeline returns the current incarnation of sandbox id.
func (b *Backend) lifeline(id string) *lifeline {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.lifelines[id]
	if !ok {
		l = &lifeline{ended: make(chan struct{})}
		b.lifelines[id] = l
	}
	return l
}

// endLifeline starts a teardown: commands started before it learn its
// outcome from finish; commands started after it get a new lifeline.
func (b *Backend) endLifeline(id string) (finish func(error)) {
	b.mu.Lock()
	l, ok := b.lifelines[id]
	delete(b.lifelines, id)
	b.mu.Unlock()
	if !ok {
		return func(error) {}
	}
	l.tearingDown.Store(true)
	return func(err error) {
		l.err = err
		close(l.ended)
	}
}

var _ backend.Backend = (*Backend)(nil)

// New checks the host (runtime, state directory, guest binary) and returns
// a Backend. It does not touch existing sandboxes (call Reattach for each),
// but removes the builders of an agent that died mid-build.
func New(opts Options) (*Backend, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	rt, err := exec.LookPath(opts.Runtime)
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w", err)
	}
	b := &Backend{
		opts:      opts,
		runc:      &runc{bin: rt, root: filepath.Join(opts.StateDir, "runc")},
		baseLinks: make(map[string]string),
		lifelines: make(map[string]*lifeline),

		imageSystems: make(map[string]system),
	}
	b.slots = backend.Slots{First: 0, N: opts.IDMapSlots, Load: b.loadSlots}
	if opts.GVisorRuntime != "" {
		if opts.GVisorRuntime, err = exec.LookPath(opts.GVisorRuntime); err != nil {
			return nil, fmt.Errorf("oci: gVisor runtime: %w", err)
		}
		b.opts.GVisorRuntime = opts.GVisorRuntime
		b.gvisor = b.newGVisor()
	}
	if !opts.UnboundedStorage {
		// Fail closed: never run sandboxes unbounded unless asked to.
		if err := checkDiskSupport(opts.Mkfs); err != nil {
			return nil, err
		}
	}
	if err := b.prepareStateDir(); err != nil {
		return nil, err
	}
	if b.guestBin, err = b.installGuest(); err != nil {
		return nil, err
	}
	for _, d := range opts.BaseDirs {
		p := filepath.Join(opts.BaseRoot, d)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, err
			}
			b.baseLinks[d] = target
		case fi.IsDir():
			b.baseDirs = append(b.baseDirs, d)
		}
	}
	if len(b.baseDirs) == 0 {
		return nil, fmt.Errorf("no base directory of %v exists under %s", opts.BaseDirs, opts.BaseRoot)
	}
	mounts := make(map[string]string, len(b.baseDirs))
	for _, d := range b.baseDirs {
		if other, ok := mounts[baseDirMount(d)]; ok {
			return nil, fmt.Errorf("oci: base directories %s and %s would share an overlay's mount point: rename one", other, d)
		}
		mounts[baseDirMount(d)] = d
	}
	for _, e := range opts.EtcFiles {
		// Stat, not Lstat: a symlink (localtime) is bound by its target.
		if _, err := os.Stat(filepath.Join(opts.BaseRoot, "etc", e)); err == nil {
			b.etcBinds = append(b.etcBinds, e)
		}
	}
	if err := b.checkOverlay(); err != nil {
		return nil, err
	}
	// The snapshot of the node's /etc entries is made now, not at the
	// first start, and what no sandbox names any more goes.
	b.sharedMu.Lock()
	seen := time.Now()
	b.shared.name, b.shared.etc, _, err = b.snapshotShared()
	if err == nil {
		b.shared.seen = seen
		b.gcShared(b.shared.name)
	}
	b.sharedMu.Unlock()
	if err != nil {
		return nil, err
	}
	if opts.WarmPool > 0 || opts.ImagePools {
		b.pool = &pool{wake: make(chan struct{}, 1), fresh: make(map[string]bool)}
	}
	b.maskedPaths = maskedPaths()
	b.cgroupParent, b.swapLimit = cgroupDefaults(opts)
	b.sweepBuilders()
	return b, nil
}

func (o *Options) setDefaults() error {
	if o.StateDir == "" || !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("oci: StateDir must be an absolute path, not %q", o.StateDir)
	}
	o.StateDir = filepath.Clean(o.StateDir)
	if o.Runtime == "" {
		o.Runtime = "runc"
	}
	if o.BaseRoot == "" {
		o.BaseRoot = "/"
	}
	if o.BaseDirs == nil {
		o.BaseDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	}
	for _, d := range o.BaseDirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || d == "/" {
			return fmt.Errorf("oci: base directory %q must be a clean absolute path below /", d)
		}
		switch d {
		case "/etc", "/proc", "/dev", "/sys", "/run", "/tmp", "/home", guestapi.Workspace, guestapi.PileDir, guestapi.Dir:
			return fmt.Errorf("oci: base directory %q would hide a sandbox mount", d)
		}
		if d == guestapi.FacultiesDir || strings.HasPrefix(guestapi.FacultiesDir, d+"/") || strings.HasPrefix(d, guestapi.FacultiesDir+"/") { //nolint:gocritic // argOrder: the faculties under d, or d under them
			// The faculties' mount point is made in the sandbox's root;
			// a read-only base directory over it has none.
			return fmt.Errorf("oci: base directory %q would hide the faculties at %s", d, guestapi.FacultiesDir)
		}
	}
	if o.EtcFiles == nil {
		o.EtcFiles = DefaultEtcFiles
	}
	for _, e := range o.EtcFiles {
		if filepath.IsAbs(e) || !filepath.IsLocal(e) {
			return fmt.Errorf("oci: etc entry %q must be a relative path inside /etc", e)
		}
		switch filepath.Clean(e) {
		case "passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf", "profile":
			return fmt.Errorf("oci: etc entry %q is generated per sandbox", e)
		}
	}
	if o.EgressNodeConns <= 0 {
		o.EgressNodeConns = DefaultEgressNodeConns
	}
	switch o.Network {
	case "":
		o.Network = NetworkNone
	case NetworkNone, NetworkEgress:
	default:
		return fmt.Errorf("oci: network %q is neither %q nor %q", o.Network, NetworkNone, NetworkEgress)
	}
	if !o.EgressPool.IsValid() {
		o.EgressPool = DefaultEgressPool
	}
	if p := o.EgressPool; !p.Addr().Is4() || p != p.Masked() || p.Bits() > 30 {
		return fmt.Errorf("oci: egress pool %s is not an IPv4 network of at least a /30", p)
	}
	if !o.EgressPool6.IsValid() {
		o.EgressPool6 = DefaultEgressPool6
	}
	if p := o.EgressPool6; !p.Addr().Is6() || p.Addr().Is4In6() || p != p.Masked() || p.Bits() > 64 {
		return fmt.Errorf("oci: egress IPv6 pool %s is not an IPv6 network of at least a /64", p)
	}
	for _, c := range o.EgressDeny {
		if p, err := netip.ParsePrefix(c); err != nil || p != p.Masked() {
			return fmt.Errorf("oci: egress deny entry %q is not a network address with a prefix length (IPv4 or IPv6)", c)
		}
	}
	d := &o.DefaultResources
	if d.CPUMillis <= 0 {
		d.CPUMillis = 1000
	}
	if d.MemoryBytes <= 0 {
		d.MemoryBytes = 1 << 30
	}
	if d.PIDs <= 0 {
		d.PIDs = 1024
	}
	if o.IDMapBase == 0 {
		o.IDMapBase = 1 << 28
	}
	if o.IDMapSlots <= 0 {
		o.IDMapSlots = 4096
	}
	if subnets := 1 << (30 - o.EgressPool.Bits()); o.Network == NetworkEgress && subnets < o.IDMapSlots {
		// Each sandbox's /30 follows from its ID-map slot.
		return fmt.Errorf("oci: egress pool %s has %d /30 subnets, fewer than the %d sandboxes a node may hold", o.EgressPool, subnets, o.IDMapSlots)
	}
	if uint64(o.IDMapBase)+uint64(o.IDMapSlots)*idMapSize > 1<<32-2 {
		return fmt.Errorf("oci: ID map slots exceed the 32-bit ID space")
	}
	if o.SpareShepherds <= 0 {
		o.SpareShepherds = 1
	}
	var err error
	if o.PileFiles, err = backend.PileFiles(o.PileFiles); err != nil {
		return fmt.Errorf("oci: %w", err)
	}
	if o.WarmPool < 0 {
		return fmt.Errorf("oci: warm pool size %d is negative", o.WarmPool)
	}
	if (o.WarmPool > 0 || o.ImagePools) && o.NewID == nil {
		return errors.New("oci: a warm pool needs NewID, which makes its sandboxes' IDs")
	}
	if o.WarmPoolRate <= 0 {
		o.WarmPoolRate = DefaultWarmPoolRate
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	d2 := &o.DefaultStorage
	for _, f := range []struct{ v, d *int64 }{
		{&d2.LayerBytes, &DefaultStorage.LayerBytes}, {&d2.LayerInodes, &DefaultStorage.LayerInodes},
		{&d2.PileBytes, &DefaultStorage.PileBytes}, {&d2.PileInodes, &DefaultStorage.PileInodes},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if err := validateStorage(o.DefaultStorage); err != nil {
		return fmt.Errorf("default storage: %w", err)
	}
	if o.StorageReserve < 0 {
		return fmt.Errorf("oci: storage reserve %d is negative", o.StorageReserve)
	}
	if o.Mkfs == "" {
		o.Mkfs = "mkfs.ext4"
		// It lives in /sbin, which the agent's PATH may lack.
		if _, err := exec.LookPath(o.Mkfs); err != nil {
			for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
				if backend.FileExists(p) {
					o.Mkfs = p
					break
				}
			}
		}
	}
	if o.GuestBinary == "" {
		p, err := backend.FindGuestBinary()
		if err != nil {
			return fmt.Errorf("oci: %w", err)
		}
		o.GuestBinary = p
	}
	return nil
}

// prepareStateDir creates the state directory's skeleton and checks that a
// sandbox's unprivileged root can traverse to its bundle.
func (b *Backend) prepareStateDir() error {
	s := b.opts.StateDir
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{s, 0o711}, {filepath.Join(s, "sandboxes"), 0o711}, {filepath.Join(s, "bin"), 0o711}, {filepath.Join(s, emptyDir), 0o755}, {filepath.Join(s, sharedDir), 0o711}, {filepath.Join(s, buildersDir), 0o700}, {b.runc.root, 0o700}, {filepath.Join(s, "runsc"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("oci: state directory: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("oci: state directory: %w", err)
		}
	}
	for p := filepath.Dir(s); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("oci: state directory: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("oci: state directory %s: its ancestor %s (mode %v) is not searchable by others; sandboxes run as an unprivileged host uid that must traverse it", s, p, fi.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

// installGuest copies the guest binary into StateDir/bin under a name
// derived from its content. A running sandbox keeps the file it mounted;
// a changed binary gets a new name and is used from the next start on.
func (b *Backend) installGuest() (string, error) {
	data, err := os.ReadFile(b.opts.GuestBinary)
	if err != nil {
		return "", fmt.Errorf("oci: guest binary: %w", err)
	}
	sum := sha256.Sum256(data)
	dst := filepath.Join(b.opts.StateDir, "bin", backend.GuestBinaryName+"-"+hex.EncodeToString(sum[:8]))
	if backend.FileExists(dst) {
		return dst, nil
	}
	return dst, atomicfile.Write(dst, data, 0o755)
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "oci" }

// Capabilities implements backend.Backend: shepherds prove cleanup, pile
// files carry FS_APPEND_FL, which the sandbox cannot clear, and egress
// lists are enforced when the agent runs with network egress.
func (b *Backend) Capabilities() backend.Capabilities {
	return b.caps.Get(func() backend.Capabilities {
		return backend.Capabilities{
			ProvesCleanup: true, AppendOnlyPile: true, SharedPile: true, Egress: b.opts.Network == NetworkEgress, Images: true,
			Prober: b, StartCounter: &b.starts, Dialer: b, OOMCounter: b, ForkCounter: b,
			WorkerSupervisor: b, StorageReporter: b, PileReader: b, FileServer: b, Isolator: b, WarmPool: b, Builder: b, SigningKeyHolder: backend.KeyInstaller{Name: "oci", Locks: &b.locks, Install: b.installSigningKey, InstallUntouched: b.installSigningKeyUntouched},
			Suspender: b.suspender(), Pauser: b, Snapshotter: b.snapshots(), UsageMeter: b, EgressBroker: b, EgressMeter: b,
			JobHolder: guestexec.Holder{Shepherd: b.jobConn, Control: b.controlConn}, Guest: &backend.Guest{StartTimeout: b.opts.StartTimeout, Connect: b.connectGuest},
		}
	})
}

// suspender is the backend as a backend.Suspender where it has gVisor,
// whose sandboxes it checkpoints (checkpoint.go).
func (b *Backend) suspender() backend.Suspender {
	if b.gvisor == nil {
		return nil
	}
	return b
}

// PileDir implements backend.Backend. The pile's filesystem is mounted
// there while the agent prepares the sandbox and, with gVisor, while it
// runs; a running runc container holds it in its own mount namespace
// only (disk.go). PileFile and InspectPile read it in every state.
func (b *Backend) PileDir(id string) string {
	return filepath.Join(b.sandboxDir(id), "pile")
}

var _ backend.PileReader = (*Backend)(nil)

// PileFile implements backend.PileReader: file name of sandbox id's pile,
// read through InspectPile, whether the sandbox runs, is stopped or was
// destroyed with its pile kept.
func (b *Backend) PileFile(id, name string) ([]byte, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("oci: pile file name %q is not a file name", name)
	}
	var data []byte
	err := b.InspectPile(id, func(dir string) (err error) {
		data, err = os.ReadFile(filepath.Join(dir, name))
		return err
	})
	return data, err
}

// Provision implements backend.Backend. It creates or refreshes the
// sandbox's storage, generated files and pile; existing files are kept.
func (b *Backend) Provision(ctx context.Context, spec backend.Spec) error {
	if err := backend.ValidateID(spec.ID); err != nil {
		return err
	}
	if err := b.validateSpec(spec); err != nil {
		return err
	}
	if err := validateStorage(b.storage(spec.Storage)); err != nil {
		return err
	}
	if err := b.checkIsolation(spec); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	sb, err := b.load(spec.ID)
	if err == nil && sb.builder {
		// A builder an agent left mid-build under this ID is nobody's
		// sandbox: it goes, and the sandbox is made anew.
		if err := b.removeBuilder(ctx, spec.ID); err != nil {
			return err
		}
		err = backend.ErrNotFound
	}
	if err == nil && sb.warm && spec.FromSnapshot != "" {
		// A fork is made from its snapshot, never from a pooled sandbox.
		if err := b.destroyLocked(ctx, spec.ID, false); err != nil {
			return err
		}
		b.pool.forget(spec.ID)
		err = backend.ErrNotFound
	}
	if err == nil && sb.warm {
		// A pooled sandbox claimed for this spec: made the tenant's in
		// place, running (pool.go).
		kept, cerr := b.claimed(ctx, sb, spec)
		if cerr != nil {
			return fmt.Errorf("oci: claiming pooled sandbox %s: %w", spec.ID, cerr)
		}
		sb.warm = false
		if !kept {
			err = backend.ErrNotFound
		}
	}
	var (
		snap    *snapshotFile
		snapDir string
	)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		if err := b.checkReserve(); err != nil {
			return err
		}
		if spec.FromSnapshot != "" {
			// A fork: the snapshot stays while it is copied.
			f, dir, unlock, err := b.snapshots().Open(spec.FromSnapshot)
			if err != nil {
				return err
			}
			defer unlock()
			snapDir = dir
			// Its layer is the snapshot's image, with its limits.
			spec.Storage.LayerBytes, spec.Storage.LayerInodes = f.Storage.LayerBytes, f.Storage.LayerInodes
			snap = &f
		}
		// The limits are fixed now, defaults included: a later change of
		// the defaults or of the spec does not resize existing images.
		spec.Storage = b.storage(spec.Storage)
		if sb, err = b.allocate(spec, false, false); err != nil {
			return err
		}
		if snap != nil {
			if err := b.fork(ctx, sb, *snap, snapDir); err != nil {
				return errors.Join(err, b.destroyLocked(ctx, spec.ID, false))
			}
		}
	case err != nil:
		return err
	default:
		if err := keepIsolation(sb, spec); err != nil {
			return err
		}
		spec.Storage = sb.spec.Storage
	}
	previous := imageOf(sb.spec)
	sb.spec = spec
	if err := b.prepare(ctx, sb); err != nil {
		if snap != nil {
			// A half-made fork goes: the next Provision makes it anew.
			return errors.Join(err, b.destroyLocked(ctx, spec.ID, false))
		}
		return err
	}
	if snap != nil {
		if err := b.finishFork(ctx, sb, *snap, snapDir); err != nil {
			return errors.Join(err, b.destroyLocked(ctx, spec.ID, false))
		}
	}
	return b.imageChanged(previous, spec)
}

// Start implements backend.Backend.
func (b *Backend) Start(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	sb, err := b.loadTenant(id)
	if err != nil {
		return err
	}
	return b.start(ctx, sb)
}

// Reattach implements backend.Backend. A running container is left alone
// (files and processes intact) once its init answers; a stopped one (say
// after a node reboot) is started again over the same files. The login
// profile is refreshed from spec; resource changes apply from the next
// start of the container.
func (b *Backend) Reattach(ctx context.Context, spec backend.Spec) error {
	if err := backend.ValidateID(spec.ID); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	// Not found comes first: a sandbox that was never made is provisioned
	// next, and a spec it cannot run is refused there, as a provisioning.
	sb, err := b.loadTenant(spec.ID)
	if err != nil {
		return err
	}
	if err := b.validateSpec(spec); err != nil {
		return err
	}
	if err := b.checkIsolation(spec); err != nil {
		return err
	}
	// The isolation is the one sandbox.json recorded at provisioning: a
	// restarted agent runs each sandbox with the runtime it was made with.
	if err := keepIsolation(sb, spec); err != nil {
		return err
	}
	spec.Storage = sb.spec.Storage // fixed at provisioning
	previous := imageOf(sb.spec)
	sb.spec = spec
	if err := b.prepare(ctx, sb); err != nil {
		return err
	}
	if err := b.imageChanged(previous, spec); err != nil {
		return err
	}
	if previous != imageOf(spec) {
		// Its image changed while no agent ran: it starts afresh on the
		// new one, its files kept, rather than run on the old.
		if err := b.stopLocked(ctx, spec.ID); err != nil {
			return err
		}
	}
	return b.start(ctx, sb)
}

// Detach implements backend.Backend. The container keeps running so that
// the tenant's background processes survive between sessions; its
// resources stay bounded by its cgroup.
func (b *Backend) Detach(_ context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	_, err := b.load(id)
	return err
}

// Destroy implements backend.Backend. Destroying a sandbox that does not
// exist succeeds, so a retried delete converges.
func (b *Backend) Destroy(ctx context.Context, id string, keepPile bool) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	b.pool.forget(id)
	return b.destroyLocked(ctx, id, keepPile)
}

// destroyLocked is Destroy; the caller holds id's lock.
func (b *Backend) destroyLocked(ctx context.Context, id string, keepPile bool) error {
	if err := b.removeContainer(ctx, id); err != nil {
		return fmt.Errorf("oci: destroying sandbox %s: %w", id, err)
	}
	if err := b.removeNetwork(ctx, id); err != nil {
		return err
	}
	forgetCredentials(id)
	defer b.forgetCPU(id)
	var image *backend.Image
	if sb, err := b.load(id); err == nil {
		image = sb.spec.Image
	}
	if err := b.removeSandboxDir(id, keepPile); err != nil {
		return err
	}
	if image != nil {
		return b.releaseImage(image.Digest)
	}
	return nil
}

// Stop ends a sandbox's container and every process in it but keeps its
// files; the next Reattach or Start runs it again over them. It is what a
// node shutdown does to sandboxes, and what `playground-dev` does on Ctrl-C
// so that it leaves no process behind.
func (b *Backend) Stop(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	// A stop is a stop: the next start is a fresh one, not a restore of a
	// suspension's checkpoint.
	if err := os.RemoveAll(b.checkpointDir(id)); err != nil {
		return fmt.Errorf("oci: stopping sandbox %s: removing its checkpoint: %w", id, err)
	}
	return b.stopLocked(ctx, id)
}

// stopLocked is Stop, for a caller that holds the sandbox's lock.
func (b *Backend) stopLocked(ctx context.Context, id string) error {
	if err := b.removeContainer(ctx, id); err != nil {
		return fmt.Errorf("oci: stopping sandbox %s: %w", id, err)
	}
	if err := b.removeNetwork(ctx, id); err != nil {
		return err
	}
	// The images are mounted again at the next start; until then no
	// mount or loop device stays behind.
	return b.unmountVolumes(id)
}

// removeContainer force-deletes the sandbox's container, if any (killing
// every process in it), and its now empty parent cgroups; files stay. The
// caller holds the sandbox's lock.
func (b *Backend) removeContainer(ctx context.Context, id string) error {
	b.pool.takeFresh(id)
	cid := containerID(id)
	rt := b.runtimeOf(id)
	if !rt.exists(cid) {
		// A delete that failed may have left its cgroups behind.
		return b.sweepCgroups(ctx, id, nil)
	}
	cgroups := rt.cgroupPaths(cid)
	retired := b.retireCPU(id, rt, cid)
	finish := b.endLifeline(id)
	err := rt.delete(ctx, cid, true)
	finish(err)
	retired(err == nil || !rt.exists(cid))
	// runc removes its state even when it gave up removing a cgroup still
	// busy with its last processes' exit (a loaded node): nothing would
	// name that cgroup again. What is left goes now, whether or not the
	// delete said so.
	swept := b.sweepCgroups(ctx, id, cgroups)
	if err != nil {
		return err
	}
	if swept != nil {
		return swept
	}
	b.removeCgroupParents(cgroups)
	return nil
}

// cgroupSweepTimeout bounds the wait for a deleted container's cgroup to
// empty: its processes are dead, and the kernel releases them shortly.
const cgroupSweepTimeout = 10 * time.Second

// sweepCgroups removes sandbox id's cgroup directories that are left
// after its container was deleted: those runc named (paths; for gVisor
// also the one in a hybrid host's unified hierarchy that
// gvisorIntoUnified made and runsc does not remove) and those the
// sandbox's cgroup path names in every hierarchy of this process (a
// container whose state is gone). A directory still busy is tried again
// until it empties or the sweep times out.
func (b *Backend) sweepCgroups(ctx context.Context, id string, paths []string) error {
	dirs := append(slices.Clone(paths), cgroupDirs(filepath.Join(b.cgroupParent, containerID(id)))...)
	ctx, cancel := context.WithTimeout(ctx, cgroupSweepTimeout)
	defer cancel()
	for _, d := range dirs {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("removing the cgroup %s of sandbox %s: %w", d, id, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("removing the cgroup %s of sandbox %s: still busy after %s: %w", d, id, cgroupSweepTimeout, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// cgroupDirs are where the cgroup rel (relative to the agent's own
// cgroup, or absolute) would be, in every hierarchy this process is in.
func cgroupDirs(rel string) []string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		mnt := "/sys/fs/cgroup"
		switch parts[1] {
		case "":
			if backend.FileExists("/sys/fs/cgroup/unified") {
				mnt = "/sys/fs/cgroup/unified"
			}
		default:
			ctl := strings.TrimPrefix(strings.Split(parts[1], ",")[0], "name=")
			if backend.FileExists(filepath.Join(mnt, parts[1])) {
				ctl = strings.TrimPrefix(parts[1], "name=")
			}
			mnt = filepath.Join(mnt, ctl)
		}
		if filepath.IsAbs(rel) {
			paths = append(paths, filepath.Join(mnt, rel))
		} else {
			paths = append(paths, filepath.Join(mnt, parts[2], rel))
		}
	}
	return paths
}

// removeNetwork removes a stopped sandbox's egress network, if it has one.
func (b *Backend) removeNetwork(ctx context.Context, id string) error {
	sb, err := b.load(id)
	if err != nil {
		// Nothing to name it by; a namespace left mounted makes removing
		// the directory fail, loudly.
		return nil //nolint:nilerr // see above
	}
	return b.teardownEgress(ctx, sb)
}

// StopAll stops every sandbox of this state directory; see Stop.
func (b *Backend) StopAll(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, b.Stop(ctx, e.Name()))
		}
	}
	if errors.Join(errs...) == nil {
		b.releaseGVisorNetns()
		errs = append(errs, b.releaseImageMounts())
	}
	return errors.Join(errs...)
}

// releaseGVisorNetns unmounts the empty network namespace runsc pins for
// its gofers under its root, shared by every gVisor sandbox and left
// mounted by them; StopAll and DestroyAll call it once none runs (runsc
// stacks one per concurrent creation: it unmounts until none is left).
func (b *Backend) releaseGVisorNetns() {
	if b.gvisor == nil {
		return
	}
	for {
		if err := unix.Unmount(filepath.Join(b.gvisor.root, "null-netns"), unix.MNT_DETACH); err != nil {
			return
		}
	}
}

// DestroyAll destroys every sandbox of this state directory, files
// included, a few at a time, and then what gVisor left mounted for them
// (see StopAll): what a tool that owns a state directory (the benchmarks,
// the soak, the tests) does to leave nothing on the node.
func (b *Backend) DestroyAll(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	ids := make(chan string)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range runtime.NumCPU() * 2 {
		wg.Go(func() {
			for id := range ids {
				if err := b.Destroy(ctx, id, false); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, e := range entries {
		if e.IsDir() {
			ids <- e.Name()
		}
	}
	close(ids)
	wg.Wait()
	if len(errs) == 0 {
		b.releaseGVisorNetns()
	}
	return errors.Join(errs...)
}

// removeCgroupParents removes the default parent cgroups ("playground" and
// the state directory's hash) above a deleted container's cgroups once they
// are empty; runc removes only the container's own. rmdir of a cgroup
// fails while it has children, so a parent still in use stays. A parent
// configured in Options.CgroupParent belongs to the operator: left alone.
func (b *Backend) removeCgroupParents(paths []string) {
	if b.opts.CgroupParent != "" {
		return
	}
	for _, p := range paths {
		parent := filepath.Dir(p)
		if filepath.Base(parent) != filepath.Base(b.cgroupParent) {
			continue
		}
		_ = os.Remove(parent)
		if top := filepath.Dir(parent); filepath.Base(top) == "playground" {
			_ = os.Remove(top)
		}
	}
}

// start runs sb's container unless it runs already, and waits for its init.
// The caller holds sb's lock.
func (b *Backend) start(ctx context.Context, sb *sandbox) error {
	if err := b.startContainer(ctx, sb); err != nil {
		return err
	}
	// Running, its container holds its volumes: the node's mounts go.
	b.releaseVolumes(sb)
	return nil
}

// startContainer is start, up to its container running and its init
// ready.
func (b *Backend) startContainer(ctx context.Context, sb *sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	cid := containerID(sb.spec.ID)
	sock := b.socketPath(sb.spec.ID)
	rt, err := b.runtimeFor(sb)
	if err != nil {
		return err
	}
	if other := b.runtimeOf(sb.spec.ID); other != rt && other.exists(cid) {
		return fmt.Errorf("oci: sandbox %s: its container runs under %s, not %s as sandbox.json says", sb.spec.ID, filepath.Base(other.bin), filepath.Base(rt.bin))
	}
	if b.pool.takeFresh(sb.spec.ID) {
		// Claimed from the pool by the Provision before this Start, its
		// container kept: running, unless its init died since (then it
		// is started over below, as any).
		if pid, err := b.initPID(sb.spec.ID); err == nil && isGuestInit(pid) && backend.FileExists(sock) {
			return nil
		}
	}
	if rt.exists(cid) {
		st, err := rt.state(ctx, cid)
		if err != nil {
			return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
		}
		if rt.gvisor && st.Status != "stopped" && !b.isGVisorSandbox(st.Pid, sb.spec.ID) {
			// runsc reports the state it last saved: a sentry the node's
			// OOM killer ended is still "running" there.
			st.Status = "stopped"
		}
		switch st.Status {
		case "running", "paused":
			if err := b.reattachEgress(ctx, sb, st.Pid); err != nil {
				return err
			}
		}
		switch st.Status {
		case "running":
			// Alive reads init.pid: keep it true to the runtime's view
			// (a sandbox started by an agent before init.pid existed),
			// replaced whole, since Alive may read it meanwhile: a torn
			// read would take a running init for a dead one.
			_ = writeIfChanged(filepath.Join(sb.dir, "init.pid"), []byte(strconv.Itoa(st.Pid)), 0o600)
			return b.waitReady(ctx, sb, st.Pid)
		case "paused":
			// Frozen on purpose (the agent's usage limit): it stays so,
			// its egress set up again, until the agent thaws it.
			if !sb.spec.Paused {
				if err := rt.resume(ctx, cid); err != nil {
					return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
				}
			}
			_ = writeIfChanged(filepath.Join(sb.dir, "init.pid"), []byte(strconv.Itoa(st.Pid)), 0o600)
			return b.waitReady(ctx, sb, st.Pid)
		}
		// created (init never started) or stopped: start over, same files.
		retired := b.retireCPU(sb.spec.ID, rt, cid)
		err = rt.delete(ctx, cid, true)
		retired(err == nil || !rt.exists(cid))
		if err != nil {
			return fmt.Errorf("oci: sandbox %s: removing stopped container: %w", sb.spec.ID, err)
		}
	}
	if err := b.prepare(ctx, sb); err != nil {
		return err
	}
	if hasEgress(sb) {
		err = b.setupEgress(ctx, sb)
	} else {
		// A sandbox whose egress list was removed starts without it.
		err = b.teardownEgress(ctx, sb)
	}
	if err != nil {
		return err
	}
	// The faculties are fixed here, as the container is made: a change
	// applies from the next start, never to a running sandbox.
	if err := b.prepareFaculties(sb); err != nil {
		return err
	}
	// gVisor's sentry has files, devices, locks and watches of its own; a
	// runc sandbox gets overlays and device nodes of its own of what
	// sandboxes share, mounted where runc starts (overlay.go).
	sys, err := b.systemOf(sb)
	if err != nil {
		return err
	}
	src := b.hostSources(sb, sys)
	var setup func() error
	if !rt.gvisor {
		if src, setup, err = b.baseFor(sb, sys); err != nil {
			return err
		}
	}
	spec := b.buildSpec(sb, src)
	if rt.gvisor {
		gvisorSpec(spec, b.resources(sb.spec.Resources).PIDs)
	}
	if err := writeSpec(filepath.Join(sb.dir, "config.json"), spec); err != nil {
		return err
	}
	// The socket's existence is init's readiness signal; drop a stale one.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	logPath := filepath.Join(sb.dir, "init.log")
	var flags []string
	if rt.gvisor && hasEgress(sb) {
		flags = gvisorEgressFlags
	}
	if rt.gvisor && b.Checkpointed(sb.spec.ID) {
		// Suspended with its memory, or a fork of a snapshot that has
		// memory: restored as it was, init not started.
		rflags := flags
		if backend.FileExists(filepath.Join(b.checkpointDir(sb.spec.ID), forkMarker)) {
			rflags = append(slices.Clone(flags), forkRestoreFlags...)
		}
		_, ok, err := b.restore(ctx, sb, rt, logPath, rflags)
		if ok || err != nil {
			return err
		}
	}
	pid, err := rt.run(ctx, sb.dir, cid, logPath, setup, flags...)
	if err != nil {
		return fmt.Errorf("oci: starting sandbox %s: %w", sb.spec.ID, err)
	}
	b.starts.Started(sb.spec.ID)
	return b.waitReady(ctx, sb, pid)
}

// Alive implements backend.Prober: whether the process that init.pid names
// still runs the guest's init. A sandbox started before init.pid was
// written counts as alive (the runtime's state would have to be asked).
func (b *Backend) Alive(id string) bool {
	if backend.ValidateID(id) != nil {
		return false
	}
	pid, err := b.initPID(id)
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && backend.FileExists(b.sandboxDir(id))
	}
	if b.isGVisorSandbox(pid, id) {
		// The sentry: it exits when the guest's init does.
		return b.gvisor.exists(containerID(id))
	}
	return isGuestInit(pid)
}

// initPID is the host PID of the sandbox's init as init.pid records it.
func (b *Backend) initPID(id string) (int, error) {
	data, err := os.ReadFile(filepath.Join(b.sandboxDir(id), "init.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("init.pid of sandbox %s holds no PID", id)
	}
	return pid, nil
}

// isGuestInit reports whether pid runs the guest's init: a PID may have
// been reused.
func isGuestInit(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(cmdline), "\x00")
	return argv0 == guestapi.Binary
}

// waitReady waits until init's socket exists (init creates it listening).
func (b *Backend) waitReady(ctx context.Context, sb *sandbox, pid int) error {
	sock := b.socketPath(sb.spec.ID)
	for delay := time.Millisecond; ; {
		if backend.FileExists(sock) {
			return nil
		}
		if pid > 0 && !backend.FileExists(fmt.Sprintf("/proc/%d", pid)) {
			return fmt.Errorf("oci: sandbox %s: init exited during start: %s", sb.spec.ID, tail(filepath.Join(sb.dir, "init.log")))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("oci: sandbox %s: init not ready: %w; log: %s", sb.spec.ID, ctx.Err(), tail(filepath.Join(sb.dir, "init.log")))
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// containerID is the runc container ID of a sandbox: valid for runc since
// sandbox IDs are validated, and recognisable in `runc list`.
func containerID(id string) string { return "pg-" + id }

func (b *Backend) sandboxDir(id string) string {
	return filepath.Join(b.opts.StateDir, "sandboxes", id)
}

func (b *Backend) socketPath(id string) string {
	return filepath.Join(b.sandboxDir(id), "run", guestapi.SocketName)
}
