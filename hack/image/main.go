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

// Command image assembles the Playground container image without a
// container daemon, for hack/image.sh (make image):
//
//	image base-layer ROOTFS.tar LAYER.tar.gz
//	    normalizes mmdebstrap's root into a reproducible, gzipped layer
//	image build --base LAYER.tar.gz --bin DIR --name REF --out ARCHIVE.tar
//	    adds the binaries of DIR in a second layer and writes an OCI archive
//	    (an OCI image layout in a tar, as skopeo's oci-archive: transport
//	    and containerd's import read it); prints its digest
//	image list ARCHIVE.tar
//	    prints the image's config and every path of its layers, for tests
//
// Why go-containerregistry and not Debian's umoci or buildah: it is the
// library that crane, ko and most registries' tooling build on, comes from
// the Go module proxy like the rest of the build (no package to install),
// and lets this tool fix every byte that would otherwise vary (mtimes,
// owners, entry order, gzip headers, the config's dates), so that the same
// inputs give the same digest. It lives in its own module so that the
// main module does not depend on it.
//
// Every timestamp is SOURCE_DATE_EPOCH (the --epoch flag).
package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// binDir is where the binaries go: playground-sandbox next to playground,
// where the agent looks for it first.
const binDir = "usr/local/bin"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "base-layer":
		err = baseLayerCmd(os.Args[2:])
	case "build":
		err = buildCmd(os.Args[2:])
	case "list":
		err = listCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: image base-layer ROOTFS.tar LAYER.tar.gz | build --base LAYER.tar.gz --bin DIR --name REF --out ARCHIVE | list ARCHIVE")
	os.Exit(2)
}

func epochFlag(fs *flag.FlagSet) *int64 {
	return fs.Int64("epoch", 0, "the time of every file and of the image (SOURCE_DATE_EPOCH)")
}

// baseLayerCmd rewrites the root file system's tar as a layer: entries
// sorted by name (so that the layer does not depend on the order of a
// directory listing), names relative without "./", every time set to the
// epoch, access and change times and user and group names dropped (ids
// stay), extended attributes kept (file capabilities), gzip with no name
// and no time. /dev's device nodes are left out: the runtime makes /dev.
func baseLayerCmd(args []string) error {
	fs := flag.NewFlagSet("base-layer", flag.ExitOnError)
	epoch := epochFlag(fs)
	_ = fs.Parse(args)
	if fs.NArg() != 2 {
		usage()
	}
	in, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer in.Close()
	mtime := time.Unix(*epoch, 0).UTC()

	// First pass: the headers, and the contents spilled to a file.
	spill, err := os.CreateTemp(filepath.Dir(fs.Arg(1)), ".spill-")
	if err != nil {
		return err
	}
	defer os.Remove(spill.Name())
	defer spill.Close()
	type entry struct {
		h      *tar.Header
		offset int64
	}
	var entries []entry
	var offset int64
	sw := bufio.NewWriterSize(spill, 1<<20)
	tr := tar.NewReader(bufio.NewReaderSize(in, 1<<20))
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := relName(h.Name)
		if name == "" || strings.HasPrefix(name, "dev/") {
			continue
		}
		if seen[name] {
			return fmt.Errorf("%s: %s twice", fs.Arg(0), name)
		}
		seen[name] = true
		n := normalize(h, mtime)
		n.Name = name
		if h.Typeflag == tar.TypeLink {
			n.Linkname = relName(h.Linkname)
		}
		size, err := io.Copy(sw, tr)
		if err != nil {
			return err
		}
		entries = append(entries, entry{n, offset})
		offset += size
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].h.Name < entries[j].h.Name })

	return writeAtomically(fs.Arg(1), func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		if err != nil {
			return err
		}
		tw := tar.NewWriter(zw)
		for _, e := range entries {
			h := e.h
			if h.Typeflag == tar.TypeDir {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			if _, err := io.Copy(tw, io.NewSectionReader(spill, e.offset, h.Size)); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return zw.Close()
	})
}

func relName(n string) string {
	n = strings.TrimPrefix(path.Clean("/"+n), "/")
	return n
}

// normalize keeps what a file is (type, mode, ids, size, link target,
// device numbers, extended attributes) and drops what says when or by
// whose name it was made.
func normalize(h *tar.Header, mtime time.Time) *tar.Header {
	n := &tar.Header{
		Typeflag: h.Typeflag,
		Linkname: h.Linkname,
		Size:     h.Size,
		Mode:     h.Mode,
		Uid:      h.Uid,
		Gid:      h.Gid,
		ModTime:  mtime,
		Devmajor: h.Devmajor,
		Devminor: h.Devminor,
		Format:   tar.FormatPAX,
	}
	for k, v := range h.PAXRecords {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			if n.PAXRecords == nil {
				n.PAXRecords = map[string]string{}
			}
			n.PAXRecords[k] = v
		}
	}
	return n
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	epoch := epochFlag(fs)
	base := fs.String("base", "", "the base layer (base-layer's output)")
	binSrc := fs.String("bin", "", "directory whose files go to /"+binDir)
	name := fs.String("name", "", "the image's reference, e.g. ghcr.io/playground-dev/playground:v0.1.0")
	out := fs.String("out", "", "the OCI archive to write")
	arch := fs.String("arch", runtime.GOARCH, "the image's architecture (that of the binaries and of the base)")
	var labels stringList
	fs.Var(&labels, "label", "KEY=VALUE label of the image (repeatable)")
	_ = fs.Parse(args)
	if *base == "" || *binSrc == "" || *name == "" || *out == "" || fs.NArg() != 0 {
		usage()
	}
	created := time.Unix(*epoch, 0).UTC()

	tmp, err := os.MkdirTemp(filepath.Dir(*out), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	binLayerPath := filepath.Join(tmp, "bin-layer.tar.gz")
	if err := writeBinLayer(binLayerPath, *binSrc, created); err != nil {
		return err
	}

	baseLayer, err := tarball.LayerFromFile(*base, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	binLayer, err := tarball.LayerFromFile(binLayerPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "mmdebstrap (hack/image.sh, hack/image/packages.txt)", Comment: "Debian root"}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "hack/image.sh", Comment: "playground binaries in /" + binDir}},
	)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = *arch, "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = []string{"/" + binDir + "/playground"}
	cf.Config.Cmd = nil
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("label %q is not KEY=VALUE", l)
		}
		cf.Config.Labels[k] = v
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}

	dir := filepath.Join(tmp, "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tag := *name
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[i+1:]
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		// skopeo's oci-archive:FILE:TAG and buildah read this one;
		"org.opencontainers.image.ref.name": tag,
		// containerd's import (ctr images import) names the image from this one.
		"io.containerd.image.name": *name,
	})); err != nil {
		return err
	}
	if err := writeAtomically(*out, func(w io.Writer) error { return tarDir(w, dir, created) }); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d.String())
	return nil
}

// writeBinLayer writes the files of src, sorted, as /usr/local/bin/*,
// owned by root, mode 0755, with the epoch as their time.
func writeBinLayer(dst, src string, mtime time.Time) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	return writeAtomically(dst, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		tw := tar.NewWriter(zw)
		d := ""
		for _, part := range strings.Split(binDir, "/") {
			d = path.Join(d, part)
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		for _, e := range entries { // os.ReadDir sorts by name
			if !e.Type().IsRegular() {
				return fmt.Errorf("%s: not a regular file", filepath.Join(src, e.Name()))
			}
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				return err
			}
			h := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(binDir, e.Name()), Mode: 0o755, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return zw.Close()
	})
}

// tarDir writes the tree under dir as a tar, sorted, every entry owned by
// root with the epoch as its time.
func tarDir(w io.Writer, dir string, mtime time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
		case fi.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, fi.Size()
		default:
			return fmt.Errorf("%s: unexpected file type in the image layout", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func writeAtomically(dst string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}

// listCmd prints the image of an OCI archive as JSON: its manifest digest,
// its config and, per layer, every entry (path, mode, uid, gid, size).
func listCmd(args []string) error {
	if len(args) != 1 {
		usage()
	}
	tmp, err := os.MkdirTemp("", "image-list-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := untar(args[0], tmp); err != nil {
		return err
	}
	idx, err := layout.ImageIndexFromPath(tmp)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 {
		return fmt.Errorf("%s: %d manifests, want 1", args[0], len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	type entry struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Mode     int64  `json:"mode"`
		UID      int    `json:"uid"`
		GID      int    `json:"gid"`
		Size     int64  `json:"size"`
		Linkname string `json:"linkname,omitempty"`
		ModTime  int64  `json:"mtime"`
	}
	out := struct {
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
		Config      *v1.ConfigFile    `json:"config"`
		Layers      [][]entry         `json:"layers"`
	}{Digest: im.Manifests[0].Digest.String(), Annotations: im.Manifests[0].Annotations, Config: cf}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		var es []entry
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				return err
			}
			es = append(es, entry{Name: h.Name, Type: string(h.Typeflag), Mode: h.Mode, UID: h.Uid, GID: h.Gid, Size: h.Size, Linkname: h.Linkname, ModTime: h.ModTime.Unix()})
		}
		rc.Close()
		out.Layers = append(out.Layers, es)
	}
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(out)
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(relName(h.Name)))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the archive", archive, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			o, err := os.Create(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(o, tr)
			o.Close()
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q of type %q in an OCI layout", archive, h.Name, h.Typeflag)
		}
	}
}
