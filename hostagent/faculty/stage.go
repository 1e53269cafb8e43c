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

package faculty

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/fingerprint"
)

// materialise writes the source tree into dst, a new directory: the
// builder's /src, or the binaries' origin without a build. Directories are
// 0755 so that a builder's user can read them; files and symbolic links
// keep their modes and targets. No file is written through a symbolic
// link or a file of the tree.
func materialise(dst string, files []fingerprint.File) error {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b fingerprint.File) int { return strings.Compare(a.Name, b.Name) })
	kinds := make(map[string]fs.FileMode, len(files))
	for _, f := range files {
		kinds[f.Name] = f.Mode
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if strings.Contains(f.Name, "\x00") || filepath.IsAbs(f.Name) || filepath.Clean(f.Name) != f.Name || f.Name == ".." || strings.HasPrefix(f.Name, "../") {
			return fmt.Errorf("%q is not a clean relative path", f.Name)
		}
		parts := strings.Split(f.Name, "/")
		for i := 1; i < len(parts); i++ {
			if m, ok := kinds[strings.Join(parts[:i], "/")]; ok && !m.IsDir() {
				return fmt.Errorf("%s: %s is not a directory", f.Name, strings.Join(parts[:i], "/"))
			}
		}
		p := filepath.Join(dst, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch {
		case f.Mode.IsDir():
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case f.Mode&fs.ModeSymlink != 0:
			if err := os.Symlink(string(f.Data), p); err != nil {
				return err
			}
		case f.Mode.IsRegular():
			if err := os.WriteFile(p, f.Data, f.Mode.Perm()); err != nil {
				return err
			}
			if err := os.Chmod(p, f.Mode.Perm()); err != nil { // past the umask
				return err
			}
		default:
			return fmt.Errorf("%s is neither a regular file, a directory nor a symbolic link", f.Name)
		}
	}
	return nil
}

// stageBinaries copies each listed binary from src (the build's /out, or
// the source tree) into dst, a new directory, as a regular file of mode
// 0555, and nothing else. A listed name that is missing, or is not a
// regular file (a symbolic link is never followed), fails the staging with
// a message naming it.
func stageBinaries(src, dst string, binaries []string, built bool) error {
	where := "the source tree"
	if built {
		where = "the build's output (/out)"
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, name := range sortedCopy(binaries) {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("binary %q is not a plain file name", name)
		}
		if err := copyRegular(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			if errors.Is(err, errNotRegular) || errors.Is(err, errMissing) {
				return fmt.Errorf("binary %q in %s %w", name, where, err)
			}
			return fmt.Errorf("binary %q in %s: %w", name, where, err)
		}
	}
	if err := os.Chmod(dst, 0o555); err != nil {
		return err
	}
	return atomicfile.SyncDir(dst)
}

// What a listed binary can be instead of a regular file.
var (
	errNotRegular = errors.New("not a regular file")
	errMissing    = errors.New("is missing")
)

// copyRegular copies the regular file src to the new file dst (0555,
// synced). src is opened without following a symbolic link, and checked
// on the open file, so that nothing swapped in between is copied.
func copyRegular(src, dst string) error {
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errMissing
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("is a symbolic link, %w: stage the file itself", errNotRegular)
	case fi.IsDir():
		return fmt.Errorf("is a directory, %w", errNotRegular)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("is %w", errNotRegular)
	}
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("is %w", errNotRegular)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(0o555); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFileSync writes a new file and syncs it.
func writeFileSync(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// removeAll removes a tree whose directories may be read-only (a staged
// bin, or whatever a builder left in /out), also when the agent runs
// without the capability to ignore permissions.
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) //nolint:gosec // G122: the agent's own tree, mounted read-only where tenants see it
		}
		return nil
	})
	return os.RemoveAll(dir)
}
