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
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/atomicfile"
)

// sandbox is one sandbox's persisted definition.
type sandbox struct {
	dir  string
	spec backend.Spec
	// slot selects the sandbox's host ID range; it never changes, since
	// the files of the writable layer are owned by IDs in that range.
	slot int
	// builder marks a throwaway builder (builder.go): no pile, and the
	// build's source and output mounted at /src and /out.
	builder bool
	// source is a builder's /src, for the build that runs it.
	source string
	// warm marks a pooled sandbox (pool.go) that no Provision has made a
	// tenant's yet.
	warm bool
}

// sandboxFile is the JSON form of a sandbox in <dir>/sandbox.json.
type sandboxFile struct {
	Spec    backend.Spec `json:"spec"`
	Slot    int          `json:"slot"`
	Builder bool         `json:"builder,omitempty"`
	Warm    bool         `json:"warm,omitempty"`
}

// validateSpec checks spec, and that this backend may run its network.
func (b *Backend) validateSpec(spec backend.Spec) error {
	if len(spec.Egress) > 0 && b.opts.Network != NetworkEgress {
		return fmt.Errorf("oci: sandbox %s asks for egress, but this agent runs sandboxes with network %q (start it with --network=egress)", spec.ID, b.opts.Network)
	}
	if err := validateEgress(spec.Egress); err != nil {
		return err
	}
	return validateSpecFields(spec)
}

func validateSpecFields(spec backend.Spec) error {
	if err := backend.ValidateLogin(spec); err != nil {
		return fmt.Errorf("oci: %w", err)
	}
	if err := validateFaculties(spec.Faculties); err != nil {
		return err
	}
	if err := validateImage(spec.Image); err != nil {
		return err
	}
	r := spec.Resources
	if r.CPUMillis < 0 || r.MemoryBytes < 0 || r.PIDs < 0 {
		return errors.New("oci: resources must not be negative")
	}
	if r.MemoryBytes > 0 && r.MemoryBytes < 32<<20 {
		return fmt.Errorf("oci: memory limit %s is below the 32Mi a sandbox's init needs", backend.FormatBytes(r.MemoryBytes))
	}
	if r.PIDs > 0 && r.PIDs < 16 {
		return fmt.Errorf("oci: pids limit %d is below the 16 a sandbox's init and shepherds need", r.PIDs)
	}
	return nil
}

// load reads a sandbox's definition; ErrNotFound if it was never
// provisioned (or was destroyed).
func (b *Backend) load(id string) (*sandbox, error) {
	dir := b.sandboxDir(id)
	var f sandboxFile
	if err := backend.ReadRecord(filepath.Join(dir, "sandbox.json"), "oci: sandbox "+id, &f); err != nil {
		return nil, err
	}
	if f.Spec.ID != id || f.Slot < 0 || f.Slot >= b.opts.IDMapSlots {
		return nil, fmt.Errorf("oci: sandbox %s: inconsistent sandbox.json", id)
	}
	return &sandbox{dir: dir, spec: f.Spec, slot: f.Slot, builder: f.Builder, warm: f.Warm}, nil
}

// loadTenant is load for the calls that run a tenant's sandbox: a builder
// that an agent left under the ID is not one (Provision replaces it), nor
// is a pooled sandbox until a Provision makes it the tenant's.
func (b *Backend) loadTenant(id string) (*sandbox, error) {
	sb, err := b.load(id)
	switch {
	case err != nil:
		return nil, err
	case sb.builder:
		return nil, fmt.Errorf("oci: sandbox %s: %w (a builder left by an earlier agent has its ID)", id, backend.ErrNotFound)
	case sb.warm:
		return nil, fmt.Errorf("oci: sandbox %s: %w (a pooled sandbox not provisioned yet)", id, backend.ErrNotFound)
	}
	return sb, nil
}

// allocate records a new sandbox with a free ID-map slot (b.slots: the
// search starts from a hash of the ID, so that agents with distinct state
// directories on one host rarely collide); a slot the sandbox did not
// hold before is given back if its sandbox.json is not written. A
// pooled sandbox (warm) gets its marker before its record, so that an
// agent that dies in between leaves it to the next one's pool to remove.
func (b *Backend) allocate(spec backend.Spec, builder, warm bool) (_ *sandbox, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, had := b.slots.Holds(spec.ID)
	slot, ok, err := b.slots.Claim(spec.ID, -1)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("oci: all %d ID-map slots are in use", b.opts.IDMapSlots)
	}
	defer func() {
		if err != nil && !had {
			b.slots.Release(spec.ID)
		}
	}()
	sb := &sandbox{dir: b.sandboxDir(spec.ID), spec: spec, slot: slot, builder: builder, warm: warm}
	if err := os.Mkdir(sb.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if warm {
		if err := ensureFile(filepath.Join(sb.dir, warmMarker), 0o600); err != nil {
			return nil, err
		}
	}
	if err := writeJSON(filepath.Join(sb.dir, "sandbox.json"), sandboxFile{Spec: spec, Slot: slot, Builder: builder, Warm: warm}, 0o600); err != nil {
		return nil, err
	}
	return sb, nil
}

// loadSlots reads which slots the sandboxes on disk hold (b.slots asks
// once), so that provisioning a sandbox does not read every other one's
// sandbox.json (a thousand sandboxes made that a second of reading per
// provision).
func (b *Backend) loadSlots() (map[int]string, error) {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	if err != nil {
		return nil, err
	}
	slots := make(map[int]string, len(entries))
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(b.opts.StateDir, "sandboxes", e.Name(), "sandbox.json"))
		if err != nil {
			continue
		}
		var f sandboxFile
		if json.Unmarshal(data, &f) == nil {
			slots[f.Slot] = e.Name()
		}
	}
	return slots, nil
}

func (b *Backend) hostIDs(sb *sandbox) (root, tenant int) {
	base := int(b.opts.IDMapBase) + sb.slot*idMapSize
	return base, base + guestapi.TenantUID
}

// prepare creates or refreshes everything of sb on disk except the runc
// config: the directory skeleton, read-only root of mount points, generated
// /etc, the writable layer and the pile. Existing tenant files are kept.
func (b *Backend) prepare(ctx context.Context, sb *sandbox) error {
	hostRoot, hostTenant := b.hostIDs(sb)
	dir := sb.dir
	// Only the sandbox's own root (by group) may traverse its directory.
	if err := ensureDir(dir, 0o710, 0, hostRoot); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "sandbox.json"), sandboxFile{Spec: sb.spec, Slot: sb.slot, Builder: sb.builder, Warm: sb.warm}, 0o600); err != nil {
		return err
	}
	sys, err := b.systemOf(sb)
	if err != nil {
		return err
	}
	if err := b.prepareRootfs(sb, sys); err != nil {
		return err
	}
	if err := b.prepareEtc(sb, sys); err != nil {
		return err
	}
	if err := b.mountVolume(ctx, sb, b.volumes(sb)[0]); err != nil {
		return err
	}
	layer := filepath.Join(dir, layerName)
	// The sandbox's root traverses the layer's root to its directories.
	if err := ensureDir(layer, 0o710, 0, hostRoot); err != nil {
		return err
	}
	for _, d := range []struct {
		name     string
		mode     os.FileMode
		uid, gid int
	}{
		{"home", 0o755, hostTenant, hostTenant},
		{"workspace", 0o755, hostTenant, hostTenant},
		// os.FileMode's sticky bit is ModeSticky, not 0o1000 (which
		// os.Chmod drops): a sandbox made before this was fixed had a
		// 0777 /tmp, which this sets right at its next start.
		{"tmp", os.ModeSticky | 0o777, hostRoot, hostRoot},
	} {
		p := filepath.Join(layer, d.name)
		if backend.FileExists(p) && d.uid == hostTenant {
			// The tenant may have changed modes of its own directories;
			// only ownership is ours to keep right.
			if err := os.Lchown(p, d.uid, d.gid); err != nil {
				return err
			}
			continue
		}
		if err := ensureDir(p, d.mode, d.uid, d.gid); err != nil {
			return err
		}
	}
	// init's socket directory: the sandbox's root only, never the tenant.
	if err := ensureDir(filepath.Join(dir, "run"), 0o700, hostRoot, hostRoot); err != nil {
		return err
	}
	if sb.builder {
		// A build's output, on the layer: bounded by its limits.
		return ensureDir(filepath.Join(layer, buildOut), 0o755, hostTenant, hostTenant)
	}
	return b.preparePile(ctx, sb)
}

// prepareRootfs creates the read-only root: mount points and the symlinks
// of merged-/usr systems. Nothing in it is writable by the sandbox.
func (b *Backend) prepareRootfs(sb *sandbox, sys system) error {
	rootfs := filepath.Join(sb.dir, "rootfs")
	if err := ensureDir(rootfs, 0o755, 0, 0); err != nil {
		return err
	}
	dirs := []string{"proc", "dev", "sys", "etc", "run", "tmp", "var", "home", guestapi.TenantHome, guestapi.Workspace, guestapi.PileDir, guestapi.Dir, guestapi.RunDir, filepath.Dir(guestapi.Binary), filepath.Dir(guestapi.FacultiesDir), guestapi.FacultiesDir}
	dirs = append(dirs, sys.dirs...)
	if sb.builder {
		dirs = append(dirs, buildSrcDir, buildOutDir)
	}
	// A base directory of another system (an image's, or the node's
	// before the sandbox had one) goes: a link never chmod'ed through.
	for _, d := range b.opts.BaseDirs {
		p := filepath.Join(rootfs, d)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		_, link := sys.links[d]
		isLink := fi.Mode()&os.ModeSymlink != 0
		if slices.Contains(sys.dirs, d) && isLink || link && !isLink || !link && !slices.Contains(sys.dirs, d) {
			_ = os.Remove(p) // a mount point (empty) or a link
		}
	}
	for _, d := range dirs {
		if err := ensureDir(filepath.Join(rootfs, d), 0o755, 0, 0); err != nil {
			return err
		}
	}
	if err := ensureFile(filepath.Join(rootfs, guestapi.Binary), 0o644); err != nil {
		return err
	}
	links := map[string]string{"var/tmp": "/tmp"}
	for d, target := range sys.links {
		links[strings.TrimPrefix(d, "/")] = target
	}
	for name, target := range links {
		p := filepath.Join(rootfs, name)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	return nil
}

// prepareEtc generates the sandbox's /etc: identities, name resolution and
// the login profile, plus mount points for the host entries in EtcFiles.
func (b *Backend) prepareEtc(sb *sandbox, sys system) error {
	etc := filepath.Join(sb.dir, "etc")
	if err := ensureDir(etc, 0o755, 0, 0); err != nil {
		return err
	}
	resolv := guestapi.NoNetworkResolv
	switch {
	case hasNamedEgress(sb):
		resolv = b.resolvConf(sb)
	case hasEgress(sb):
		// The node's resolvers, reachable only where the egress list
		// allows their address and port 53.
		if data, err := os.ReadFile(filepath.Join(b.opts.BaseRoot, "etc", "resolv.conf")); err == nil {
			resolv = string(data)
		}
	}
	files := backend.EtcFiles(sb.spec, resolv)
	for name, content := range files {
		if err := writeIfChanged(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// An entry of another system goes (a mount point, or an image's
	// link); the generated files are not entries.
	for _, e := range b.opts.EtcFiles {
		if _, ok := files[e]; ok || slices.Contains(sys.etc, e) {
			continue
		}
		p := filepath.Join(etc, e)
		if target, ok := sys.etcLinks[e]; ok {
			if cur, err := os.Readlink(p); err == nil && cur == target {
				continue
			}
			_ = os.RemoveAll(p)
			if err := os.Symlink(target, p); err != nil {
				return err
			}
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			_ = os.RemoveAll(p)
		}
	}
	for _, e := range sys.etc {
		src := filepath.Join(sys.root, "etc", e)
		dst := filepath.Join(etc, e)
		stat := os.Stat
		if sys.image {
			// Checked by inspectImage: no link on the way.
			stat = os.Lstat
		}
		fi, err := stat(src)
		if err != nil {
			continue
		}
		if cur, err := os.Lstat(dst); err == nil && cur.Mode()&os.ModeSymlink != 0 {
			_ = os.Remove(dst)
		}
		if err := ensureDir(filepath.Dir(dst), 0o755, 0, 0); err != nil {
			return err
		}
		if fi.IsDir() {
			err = ensureDir(dst, 0o755, 0, 0)
		} else {
			err = ensureFile(dst, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeSandboxDir unmounts a sandbox's volumes and deletes its files;
// with keepPile the pile stays (flags and all), and nothing else: its
// image, or with UnboundedStorage its directory at PileDir.
func (b *Backend) removeSandboxDir(id string, keepPile bool) error {
	dir := b.sandboxDir(id)
	defer func() {
		if !backend.FileExists(filepath.Join(dir, "sandbox.json")) {
			b.slots.Release(id)
		}
	}()
	// Never remove files through a mount: a kept pile would go too.
	if err := b.unmountVolumes(id); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pile := filepath.Join(dir, pileName)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch e.Name() {
		case pileName, pileName + imageSuffix:
			if keepPile {
				continue
			}
			if e.IsDir() {
				if err := clearAppendOnly(p); err != nil {
					return fmt.Errorf("oci: clearing the pile's append-only flags: %w", err)
				}
			}
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if keepPile && backend.FileExists(pile+imageSuffix) {
		// The image is the pile; its mount point, empty now, is made
		// again when a sandbox takes the pile up.
		if err := os.Remove(pile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("oci: removing the retained pile's mount point: %w", err)
		}
		return nil
	}
	if keepPile && backend.FileExists(pile) {
		return nil
	}
	return os.Remove(dir)
}

// cgroupDefaults picks the cgroup parent and whether memory+swap can be
// limited (v1 needs swap accounting for memory.memsw.*).
func cgroupDefaults(opts Options) (parent string, swap bool) {
	unifiedOnly := backend.FileExists("/sys/fs/cgroup/cgroup.controllers")
	swap = unifiedOnly || backend.FileExists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
	if opts.CgroupParent != "" {
		return opts.CgroupParent, swap
	}
	h := sha256.Sum256([]byte(opts.StateDir))
	name := "playground/" + hex.EncodeToString(h[:])[:12]
	if unifiedOnly {
		return "/" + name, swap
	}
	return name, swap
}

// ensureDir creates p (if missing) and sets its mode and owner.
func ensureDir(p string, mode os.FileMode, uid, gid int) error {
	if err := os.Mkdir(p, mode); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

// ensureFile creates an empty file (a mount point) if p is missing.
func ensureFile(p string, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, mode)
	if err != nil {
		return err
	}
	return f.Close()
}

func writeJSON(path string, v any, mode os.FileMode) error {
	data, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return err
	}
	return writeIfChanged(path, append(data, '\n'), mode)
}

// writeIfChanged replaces path with data by atomicfile.Write, so that
// readers (and bind mounts of the containing directory) see the old or the
// new content, never a mix, and a crash leaves one of them. A file that
// holds data already is left alone (its mode too): every start of a
// sandbox writes its files again, and most have not changed.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	return atomicfile.Write(path, data, mode)
}

// tail returns the end of a log file for error messages.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log)"
	}
	defer f.Close()
	const most = 2048
	if fi, err := f.Stat(); err == nil && fi.Size() > most {
		_, _ = f.Seek(-most, io.SeekEnd)
	}
	data, _ := io.ReadAll(io.LimitReader(f, most))
	return strings.TrimSpace(string(data))
}
