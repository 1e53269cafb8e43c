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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Faculties. A sandbox's faculty builds are bind-mounted read-only (exec
// allowed, no setuid, no devices) at guestapi.FacultiesDir/<name>, each from
// an overlay of the sandbox's own under runc (overlay.go), inside a
// read-only directory of the sandbox's own, <sandbox>/faculties, mounted at
// guestapi.FacultiesDir: it holds the builds' mount points and bin/, the
// symbolic links that put the listed binaries on PATH. That directory is
// made afresh when the container is created (start), never while it runs,
// so a change of Spec.Faculties shows at the next restart and a running
// sandbox never sees its set change under it.
//
// Every sandbox has it, with an empty bin/ when it has no faculty: PATH
// names an existing, read-only directory in every sandbox, and a
// restart that adds the first faculty changes no mount point of the root.

const facultiesName = "faculties"

// facultyName is what a faculty's Name may be: a FacultyBundle's name (a
// DNS subdomain) is one; it is a path element of the guest.
var facultyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$`)

// validateFaculties checks the names a spec installs, before anything is
// made of them.
func validateFaculties(fs []backend.Faculty) error {
	seen := make(map[string]bool, len(fs))
	shared := 0
	for _, f := range fs {
		if f.SharedPile {
			shared++
		}
		switch {
		case shared > 1:
			return fmt.Errorf("oci: faculty %s is a second shared pile: a sandbox has one", f.Name)
		case !facultyName.MatchString(f.Name) || strings.Contains(f.Name, ".."):
			return fmt.Errorf("oci: faculty name %q is not a plain name of [A-Za-z0-9_.-]", f.Name)
		case f.Name == filepath.Base(guestapi.FacultiesBin):
			return fmt.Errorf("oci: a faculty cannot be named %q: %s holds the faculties' binaries", f.Name, guestapi.FacultiesBin)
		case seen[f.Name]:
			return fmt.Errorf("oci: faculty %q is listed twice", f.Name)
		case !filepath.IsAbs(f.Dir) || filepath.Clean(f.Dir) != f.Dir:
			return fmt.Errorf("oci: faculty %s: its directory %q is not a clean absolute path", f.Name, f.Dir)
		}
		seen[f.Name] = true
		for _, bin := range f.Binaries {
			if bin == "" || bin == "." || bin == ".." || strings.ContainsAny(bin, "/\x00") || len(bin) > 255 {
				return fmt.Errorf("oci: faculty %s: binary %q is not a plain file name", f.Name, bin)
			}
		}
	}
	return nil
}

// prepareFaculties makes <sandbox>/faculties for sb's faculties: a mount
// point per build and bin/ with a link per binary (the first faculty
// listed wins a name both have). The caller holds sb's lock, and sb's
// container does not exist.
func (b *Backend) prepareFaculties(sb *sandbox) error {
	for _, f := range sb.spec.Faculties {
		if err := checkFacultyDir(f); err != nil {
			return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
		}
	}
	dir := filepath.Join(sb.dir, facultiesName)
	// Only links and empty directories are in it: nothing of a build.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := ensureDir(dir, 0o755, 0, 0); err != nil {
		return err
	}
	bin := filepath.Join(dir, filepath.Base(guestapi.FacultiesBin))
	if err := ensureDir(bin, 0o755, 0, 0); err != nil {
		return err
	}
	linked := make(map[string]bool)
	for _, f := range sb.spec.Faculties {
		if f.SharedPile {
			continue // mounted in the pile (preparePile), nothing on the PATH
		}
		if err := ensureDir(filepath.Join(dir, f.Name), 0o755, 0, 0); err != nil {
			return err
		}
		for _, name := range f.Binaries {
			if linked[name] {
				continue
			}
			linked[name] = true
			if err := os.Symlink(filepath.Join(guestapi.FacultiesDir, f.Name, name), filepath.Join(bin, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFacultyDir says why a faculty's build cannot be installed, if it
// cannot: its directory must be a directory the sandbox's unprivileged
// root can reach (the runtime mounts it as that user), holding each
// listed binary as a regular file.
func checkFacultyDir(f backend.Faculty) error {
	if err := checkReachable(f.Dir); err != nil {
		return fmt.Errorf("faculty %s: its build: %w", f.Name, err)
	}
	for _, name := range f.Binaries {
		bi, err := os.Lstat(filepath.Join(f.Dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("faculty %s: its build %s has no binary %s", f.Name, f.Dir, name)
		}
		if err != nil {
			return fmt.Errorf("faculty %s: %w", f.Name, err)
		}
		if !bi.Mode().IsRegular() {
			return fmt.Errorf("faculty %s: binary %s in %s is not a regular file", f.Name, name, f.Dir)
		}
	}
	return nil
}

// facultyMounts are the mounts of sb's faculties, in order: the directory
// of mount points and links, then each build (from src) over its mount
// point.
func facultyMounts(sb *sandbox, src sources) []mount {
	ro := []string{"bind", "ro", "nosuid", "nodev"}
	// noexec: it holds only links; what they lead to runs from the
	// builds' own mounts.
	ms := []mount{{Destination: guestapi.FacultiesDir, Type: "bind", Source: filepath.Join(sb.dir, facultiesName), Options: append(ro, "noexec")}}
	for _, f := range sb.spec.Faculties {
		if f.SharedPile {
			// Read, never run: the pile's own mount is noexec too. Its
			// mount point is in the pile, which is mounted before.
			ms = append(ms, mount{Destination: guestapi.SharedPileDir, Type: "bind", Source: src.faculties[f.Name], Options: append(ro, "noexec")})
			continue
		}
		ms = append(ms, mount{Destination: filepath.Join(guestapi.FacultiesDir, f.Name), Type: "bind", Source: src.faculties[f.Name], Options: ro})
	}
	return ms
}

// hasSharedPile says whether sb mounts a shared pile.
func hasSharedPile(sb *sandbox) bool {
	return slices.ContainsFunc(sb.spec.Faculties, func(f backend.Faculty) bool { return f.SharedPile })
}
