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

// Command images writes a single-layer image as a docker-archive tar that
// `ctr images import` reads, for hack/cluster.sh: no registry is reachable
// here, so the pause image and a test image are made from local files.
//
//	images -name playground.local/pause:cluster -out pause.tar /pause=bin/pause -entrypoint /pause
//
// Each FILE argument is DEST=SRC (a regular file, copied with its mode) or
// DEST->TARGET (a symbolic link).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ref := flag.String("name", "", "image reference")
	out := flag.String("out", "", "docker-archive tar to write")
	entrypoint := flag.String("entrypoint", "", "entrypoint (space separated)")
	flag.Parse()
	if err := run(*ref, *out, *entrypoint, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ref, out, entrypoint string, files []string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	sort.Strings(files)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	for _, f := range files {
		var dest, src, link string
		if d, t, ok := strings.Cut(f, "->"); ok {
			dest, link = d, t
		} else if d, s, ok := strings.Cut(f, "="); ok {
			dest, src = d, s
		} else {
			return fmt.Errorf("%q: want DEST=SRC or DEST->TARGET", f)
		}
		dest = strings.TrimPrefix(path.Clean(dest), "/")
		for _, d := range parents(dest) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if link != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: dest, Linkname: link, Mode: 0o777, ModTime: epoch}); err != nil {
				return err
			}
			continue
		}
		if err := addFile(tw, dest, src, epoch); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = strings.Fields(entrypoint)
	cf.Config.Env = []string{"PATH=/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// parents lists p's parent directories, outermost first.
func parents(p string) []string {
	var ds []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		ds = append([]string{d}, ds...)
	}
	return ds
}

func addFile(tw *tar.Writer, dest, src string, mtime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dest, Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: mtime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
