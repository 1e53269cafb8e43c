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
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// WriteInitrd writes an uncompressed initramfs (cpio "newc") holding
// guestBinary as /init and the modules of modulesDir with their load order
// (guestapi.VMModulesOrder). It is uncompressed because a TCG guest is slower
// at inflating it than at reading it.
func WriteInitrd(w io.Writer, guestBinary, modulesDir string) error {
	order, err := ModuleOrder(modulesDir)
	if err != nil {
		return err
	}
	cw := &cpioWriter{w: w}
	bin, err := os.ReadFile(guestBinary)
	if err != nil {
		return err
	}
	cw.file("init", 0o100755, bin)
	cw.file(strings.TrimPrefix(guestapi.VMModulesDir, "/"), 0o040755, nil)
	for _, name := range order {
		b, err := os.ReadFile(filepath.Join(modulesDir, name))
		if err != nil {
			return err
		}
		cw.file(strings.TrimPrefix(guestapi.VMModulesDir, "/")+"/"+name, 0o100644, b)
	}
	cw.file(strings.TrimPrefix(guestapi.VMModulesDir, "/")+"/"+guestapi.VMModulesOrder, 0o100644, []byte(strings.Join(order, "\n")+"\n"))
	cw.file("TRAILER!!!", 0, nil)
	return cw.err
}

// ModuleOrder returns the *.ko files of dir, each after those it depends on
// (the "depends=" of its .modinfo section). A dependency missing from dir
// is an error: the guest could not load the module.
func ModuleOrder(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.ko"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	deps := make(map[string][]string) // module name -> names it depends on
	file := make(map[string]string)   // module name -> file name
	for _, f := range files {
		d, err := moduleDepends(f)
		if err != nil {
			return nil, err
		}
		name := moduleName(filepath.Base(f))
		deps[name] = d
		file[name] = filepath.Base(f)
	}
	var order []string
	state := make(map[string]int) // 1 visiting, 2 done
	var visit func(string, []string) error
	visit = func(m string, path []string) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("vm: module dependency cycle: %s", strings.Join(append(path, m), " -> "))
		case 2:
			return nil
		}
		if _, ok := file[m]; !ok {
			return fmt.Errorf("vm: module %s (needed by %s) is not in %s", m, path[len(path)-1], dir)
		}
		state[m] = 1
		for _, d := range deps[m] {
			if err := visit(d, append(path, m)); err != nil {
				return err
			}
		}
		state[m] = 2
		order = append(order, file[m])
		return nil
	}
	for _, f := range files {
		if err := visit(moduleName(filepath.Base(f)), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleName is the kernel's name of a module file: no suffix, dashes as
// underscores.
func moduleName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(file, ".ko"), "-", "_")
}

func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vm: module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("vm: module %s has no .modinfo", path)
	}
	b, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("vm: module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				out = append(out, moduleName(d))
			}
			return out, nil
		}
	}
	return nil, nil
}

// cpioWriter writes the "newc" format the kernel unpacks.
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

func (c *cpioWriter) file(name string, mode uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o040000 != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	buf := append([]byte(hdr), name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	if _, c.err = c.w.Write(buf); c.err != nil {
		return
	}
	if _, c.err = c.w.Write(data); c.err != nil {
		return
	}
	if n := len(data) % 4; n != 0 {
		_, c.err = c.w.Write(make([]byte, 4-n))
	}
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
