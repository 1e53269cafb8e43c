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

package vm

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// readNewc parses a cpio "newc" archive as the kernel does.
func readNewc(t *testing.T, b []byte) map[string]struct {
	mode uint64
	data []byte
} {
	t.Helper()
	out := map[string]struct {
		mode uint64
		data []byte
	}{}
	field := func(h []byte, i int) uint64 {
		v, err := strconv.ParseUint(string(h[6+8*i:6+8*i+8]), 16, 32)
		if err != nil {
			t.Fatalf("header field %d: %v", i, err)
		}
		return v
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for off := 0; ; {
		if len(b)-off < 110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		h := b[off : off+110]
		mode, size, namesize := field(h, 1), int(field(h, 6)), int(field(h, 11))
		name := string(b[off+110 : off+110+namesize-1])
		if b[off+110+namesize-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		data := off + align(110+namesize)
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = struct {
			mode uint64
			data []byte
		}{mode, b[data : data+size]}
		off = data + align(size)
	}
}

func TestWriteInitrdIsANewcArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "guest")
	content := []byte("not really an ELF, odd length")
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(dir, "modules")
	if err := os.Mkdir(modules, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteInitrd(&buf, bin, modules); err != nil {
		t.Fatal(err)
	}
	files := readNewc(t, buf.Bytes())
	if f := files["init"]; f.mode != 0o100755 || !bytes.Equal(f.data, content) {
		t.Errorf("init: mode %o, %q", f.mode, f.data)
	}
	if f, ok := files["modules"]; !ok || f.mode != 0o040755 {
		t.Errorf("modules: %v, mode %o", ok, f.mode)
	}
	if f, ok := files["modules/order"]; !ok || string(f.data) != "\n" {
		t.Errorf("modules/order: %v, %q", ok, f.data)
	}
	if len(files) != 3 {
		t.Errorf("%d entries, want 3", len(files))
	}
}

func TestModuleOrderRefusesAMissingDependency(t *testing.T) {
	_, modules, _ := vmImage(t)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(modules, "ext4.ko"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ext4.ko"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ModuleOrder(dir); err == nil {
		t.Fatal("ext4 alone was ordered; jbd2, mbcache and crc16 are missing")
	} else {
		t.Log(err)
	}
}
