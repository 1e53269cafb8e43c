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

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/internal/registrytest"
)

// imageFiller is the random (incompressible) part of P8's image, beside
// this machine's shell, cat and their libraries: about 100 MiB pulled.
const imageFiller = 100 << 20

// imageTenants is how many sandboxes of one image P8's disk row holds.
const imageTenants = 50

// imageSamples is how many starts each start row takes the median of.
const imageSamples = 7

// imageCosts is P8: what running a sandbox on an image costs beside one on
// the node's system, through the node's image store and the oci backend
// directly (no gateway, no control plane: P1 and P3 measure those, and
// they are the same for both), against a registry in this process on
// loopback. Cold pull and unpack → first exec; a start with the image
// cached, alone and beside a sandbox of it; exec `true`; the disk of imageTenants sandboxes of the image;
// the memory of an idle one. Each image row is measured alternately with
// its default-system baseline, so that the machine's noise falls on both.
func imageCosts(ctx context.Context, opts options, execs int, out io.Writer) (rows []row, err error) {
	dir, err := os.MkdirTemp("", "pgimg")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Sandboxes' unprivileged roots traverse the path to their bundles.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	guest := opts.guest
	if guest == "" {
		if guest, err = backend.FindGuestBinary(); err != nil {
			return nil, err
		}
	}
	tb := &benchTB{}
	defer tb.cleanup()
	defer func() {
		// A helper's failure is P8's error.
		if r := recover(); r != nil {
			f, ok := r.(tbFailure)
			if !ok {
				panic(r)
			}
			rows, err = nil, errors.New(string(f))
		}
	}()

	fmt.Fprintf(out, "  building an image of %d MiB and pushing it to a registry on loopback...\n", imageFiller>>20)
	reg := registrytest.Start(tb)
	filler := make([]registrytest.Entry, 0, imageFiller/(4<<20)+1)
	filler = append(filler, registrytest.Dir("usr/share/filler/"))
	for i := range imageFiller / (4 << 20) {
		b := make([]byte, 4<<20)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		filler = append(filler, registrytest.File(fmt.Sprintf("usr/share/filler/%02d", i), string(b), 0o644))
	}
	// The loader's cache, as a distribution's image has one: without it
	// the loader tries some twenty places for each library first, each a
	// lookup through the image's overlay (3% of an exec of true). The
	// node's names its libraries where the image has them.
	system := registrytest.System(tb, "ID=bench-image\n", true, "dash", "cat")
	if cache, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		system = append(system, registrytest.File("etc/ld.so.cache", string(cache), 0o644))
	}
	img := registrytest.Image(tb, []string{"PATH=/usr/bin"},
		registrytest.Layer(tb, registrytest.Tar(tb, system...)),
		registrytest.Layer(tb, registrytest.Tar(tb, filler...)))
	ref := reg.Push(tb, "bench/image", "1", img, nil)
	compressed, err := compressedSize(img)
	if err != nil {
		return nil, err
	}

	be, err := oci.New(oci.Options{StateDir: filepath.Join(dir, "oci"), GuestBinary: guest})
	if err != nil {
		return nil, err
	}
	var ids []string
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, id := range ids {
			_ = be.Destroy(sctx, id, false)
		}
		_ = be.StopAll(sctx)
	}()
	openStore := func(name string) (*imagestore.Store, error) {
		return imagestore.Open(imagestore.Options{Dir: filepath.Join(dir, name), PlainHTTP: []string{reg.Host}})
	}
	// start provisions and starts a sandbox (on the store's image when
	// store is set, its image got first) and runs `true` in it.
	start := func(id string, store *imagestore.Store) (pull time.Duration, err error) {
		spec := backend.Spec{ID: id, Tenant: "bench/" + id}
		if store != nil {
			t0 := time.Now()
			got, release, err := store.Get(ctx, imagestore.Request{Ref: ref, Tenant: spec.Tenant})
			if err != nil {
				return 0, err
			}
			// Held until the bench ends, as the agent holds it while the
			// sandbox exists.
			tb.Cleanup(release)
			pull = time.Since(t0)
			spec.Image = &backend.Image{Digest: got.Digest, Layers: got.Layers, Env: got.Config.Env, WorkingDir: got.Config.WorkingDir}
		}
		ids = append(ids, id)
		if err := be.Provision(ctx, spec); err != nil {
			return 0, err
		}
		if err := be.Start(ctx, id); err != nil {
			return 0, err
		}
		return pull, runTrue(ctx, be, id)
	}
	timed := func(id string, store *imagestore.Store) (total, pull time.Duration, err error) {
		t0 := time.Now()
		pull, err = start(id, store)
		return time.Since(t0), pull, err
	}

	destroy := func(id string) error {
		ids = slices.DeleteFunc(ids, func(s string) bool { return s == id })
		return be.Destroy(ctx, id, false)
	}
	// Each image start's baseline is the default starts made between the
	// image's of the same phase, as many sandboxes running meanwhile.
	plains := 0
	plainStart := func(phase *[]time.Duration) error {
		d, _, err := timed(fmt.Sprintf("plain%02d", plains), nil)
		if err != nil {
			return fmt.Errorf("a default start: %w", err)
		}
		plains++
		*phase = append(*phase, d)
		return nil
	}
	var plainCold, plainAlone, plainBeside []time.Duration

	// Cold: a store of its own each time, so that every layer is fetched
	// and unpacked, and no sandbox of the image left, so that its mount
	// is made anew; beside a default sandbox's start.
	fmt.Fprintln(out, "  cold pulls...")
	var cold, coldPull []time.Duration
	for i := range 3 {
		store, err := openStore(fmt.Sprintf("cold%02d", i))
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("cold%02d", i)
		d, p, err := timed(id, store)
		if err != nil {
			return nil, fmt.Errorf("a cold start on the image: %w", err)
		}
		cold, coldPull = append(cold, d), append(coldPull, p)
		if err := destroy(id); err != nil {
			return nil, err
		}
		if err := plainStart(&plainCold); err != nil {
			return nil, err
		}
	}
	// Cached: one store that has the image. First with no sandbox of it
	// running (the backend mounts the image's layers), then beside one
	// (its mount shared).
	fmt.Fprintln(out, "  starts with the image cached...")
	store, err := openStore("store")
	if err != nil {
		return nil, err
	}
	_, release, err := store.Get(ctx, imagestore.Request{Ref: ref, Tenant: "bench/warm-up"})
	if err != nil {
		return nil, err
	}
	release()
	var alone, beside []time.Duration
	for i := range imageSamples {
		id := fmt.Sprintf("alone%02d", i)
		d, _, err := timed(id, store)
		if err != nil {
			return nil, fmt.Errorf("a start with the image cached: %w", err)
		}
		alone = append(alone, d)
		if err := destroy(id); err != nil {
			return nil, err
		}
		if err := plainStart(&plainAlone); err != nil {
			return nil, err
		}
	}
	if _, err := start("img00", store); err != nil {
		return nil, err
	}
	for i := 1; i <= imageSamples; i++ {
		d, _, err := timed(fmt.Sprintf("img%02d", i), store)
		if err != nil {
			return nil, fmt.Errorf("a start with the image cached: %w", err)
		}
		beside = append(beside, d)
		if err := plainStart(&plainBeside); err != nil {
			return nil, err
		}
	}
	// exec `true`, alternately in an image sandbox and a default one,
	// each first every other time, so that neither always follows the
	// other.
	fmt.Fprintln(out, "  exec `true`...")
	var inImage, inPlain []time.Duration
	timeTrue := func(id string) (time.Duration, error) {
		t0 := time.Now()
		err := runTrue(ctx, be, id)
		return time.Since(t0), err
	}
	for i := range execs + max(execs/10, 3) {
		order := []string{"img00", "plain00"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var took [2]time.Duration
		for k, id := range order {
			if took[k], err = timeTrue(id); err != nil {
				return nil, err
			}
		}
		if i%2 == 1 {
			took[0], took[1] = took[1], took[0]
		}
		if i >= max(execs/10, 3) { // warm-up apart
			inImage, inPlain = append(inImage, took[0]), append(inPlain, took[1])
		}
	}
	slices.Sort(cold)
	slices.Sort(coldPull)
	slices.Sort(alone)
	slices.Sort(beside)
	slices.Sort(plainCold)
	slices.Sort(plainAlone)
	slices.Sort(plainBeside)
	slices.Sort(inImage)
	slices.Sort(inPlain)

	// Memory of an idle sandbox: the image's and the default's started
	// above (and not destroyed), left idle; not the two that ran the
	// execs, whose shepherds hold what those left.
	time.Sleep(2 * time.Second)
	pssOfAll := func(prefix string, n int) int64 {
		var total int64
		for i := 1; i < n; i++ {
			for _, pid := range processesInCgroup(fmt.Sprintf("pg-%s%02d", prefix, i)) {
				total += pssOf(pid)
			}
		}
		return total / int64(n-1)
	}
	imgPss, plainPss := pssOfAll("img", imageSamples+1), pssOfAll("plain", plains)

	// Disk: imageTenants sandboxes of the image in all (those above and
	// more), the node's disk for them beside one unpacked copy and their
	// own directories (writable layer, pile, bundle).
	fmt.Fprintf(out, "  %d sandboxes of the image...\n", imageTenants)
	for i := imageSamples + 1; i < imageTenants; i++ {
		if _, err := start(fmt.Sprintf("img%02d", i), store); err != nil {
			return nil, fmt.Errorf("sandbox %d of the image: %w", i, err)
		}
	}
	seen := map[[2]uint64]bool{}
	var own int64
	for i := range imageTenants {
		b, err := diskOf(filepath.Join(dir, "oci", "sandboxes", fmt.Sprintf("img%02d", i)), seen)
		if err != nil {
			return nil, err
		}
		own += b
	}
	// The rest of the node's disk, every file once (the sandboxes' above
	// are seen already): the store, and the backend's shared state (the
	// node's /etc copies, the guest, image mount points), of which the
	// default sandboxes' directories are not the image's cost.
	rest, err := diskOf(filepath.Join(dir, "store"), seen)
	if err != nil {
		return nil, err
	}
	for i := range plains {
		if _, err := diskOf(filepath.Join(dir, "oci", "sandboxes", fmt.Sprintf("plain%02d", i)), seen); err != nil {
			return nil, err
		}
	}
	shared, err := diskOf(filepath.Join(dir, "oci"), seen)
	if err != nil {
		return nil, err
	}
	node := own + rest + shared
	unpacked := store.Bytes()

	coldRatio := ratio(pct(cold, .5), pct(plainCold, .5))
	aloneRatio, besideRatio := ratio(pct(alone, .5), pct(plainAlone, .5)), ratio(pct(beside, .5), pct(plainBeside, .5))
	execGoal := ratio(pct(inImage, .5), pct(inPlain, .5))
	diskRatio := float64(node) / float64(unpacked+own)
	memRatio := float64(imgPss) / float64(max(plainPss, 1))
	return []row{
		{fmt.Sprintf("P8 image: cold pull and unpack of %.0f MiB (registry on loopback) → first exec, median of 3", float64(compressed)/(1<<20)),
			ms(pct(cold, .5)), "default system's provision → first exec " + ms(pct(plainCold, .5)), fmt.Sprintf("%.1f×", coldRatio), "(for reference)", "—"},
		{"P8 image: of which the pull and unpack", ms(pct(coldPull, .5)), "", "", "(explains the row above)", "—"},
		{fmt.Sprintf("P8 image: start with the image cached, no sandbox of it running (its layers mounted) → first exec, median of %d", imageSamples),
			ms(pct(alone, .5)), fmt.Sprintf("default system's between them, median of %d, %s", len(plainAlone), ms(pct(plainAlone, .5))), fmt.Sprintf("%.2f×", aloneRatio), "≤ 1.1×", verdict(aloneRatio <= 1.1)},
		{fmt.Sprintf("P8 image: start with the image cached, beside a sandbox of it (its mount shared) → first exec, median of %d", imageSamples),
			ms(pct(beside, .5)), fmt.Sprintf("default system's between them, median of %d, %s", len(plainBeside), ms(pct(plainBeside, .5))), fmt.Sprintf("%.2f×", besideRatio), "≤ 1.1×", verdict(besideRatio <= 1.1)},
		{fmt.Sprintf("P8 image: exec `true` p50 of %d (backend)", len(inImage)),
			ms(pct(inImage, .5)), "default system's " + ms(pct(inPlain, .5)), fmt.Sprintf("%.2f×", execGoal), "≤ 1.05×", verdict(execGoal <= 1.05)},
		{fmt.Sprintf("P8 image: the node's disk for %d sandboxes of one image (store and backend state, each file once)", imageTenants),
			mib1(node), fmt.Sprintf("one unpacked copy %s + their own directories %s", mib1(unpacked), mib1(own)), fmt.Sprintf("%.3f×", diskRatio), "≤ 1.05×", verdict(diskRatio <= 1.05)},
		{fmt.Sprintf("P8 image: host memory per idle sandbox on the image (PSS of its processes, %d sandboxes)", imageSamples),
			pssMiB(imgPss), fmt.Sprintf("default system's, %d sandboxes, %s", plains-1, pssMiB(plainPss)), fmt.Sprintf("%.2f×", memRatio), "unchanged (≤ 1.05×)", verdict(memRatio <= 1.05)},
	}, nil
}

// compressedSize is what pulling img fetches: its layers' compressed
// bytes.
func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// diskOf is the disk the files under dir take (allocated blocks: a sparse
// file's holes are free), each file once across calls (seen, by device
// and inode), not crossing into a mount.
func diskOf(dir string, seen map[[2]uint64]bool) (int64, error) {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		return 0, err
	}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone since it was listed
		}
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", p)
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		key := [2]uint64{st.Dev, st.Ino}
		if seen[key] {
			return nil
		}
		seen[key] = true
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// benchTB lets the bench build and serve images with internal/registrytest,
// whose helpers take a testing.TB: a failure ends P8 with its message
// (imageCosts recovers it), and the cleanups run when P8 ends. Only the methods below are called; the
// embedded TB is nil.
type benchTB struct {
	testing.TB
	cleanups []func()
}

// tbFailure is a failure of a registrytest helper, carried by a panic to
// benchTB.recover.
type tbFailure string

func (*benchTB) Helper()                      {}
func (*benchTB) Fatal(args ...any)            { panic(tbFailure(fmt.Sprint(args...))) }
func (*benchTB) Fatalf(f string, args ...any) { panic(tbFailure(fmt.Sprintf(f, args...))) }
func (*benchTB) Skipf(f string, args ...any)  { panic(tbFailure(fmt.Sprintf(f, args...))) }
func (b *benchTB) Cleanup(f func())           { b.cleanups = append(b.cleanups, f) }

func (b *benchTB) cleanup() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}

// mib1 is a size in MiB to a tenth: the disk row's figures differ by less
// than a MiB.
func mib1(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
