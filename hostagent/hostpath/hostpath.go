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

// Package hostpath decides which directories of its node an agent reads
// as FacultyBundle sources (spec.source.hostPath), and reads them.
//
// A FacultyBundle is namespaced: whoever may create one in some namespace
// names the path. So the path grants nothing by itself. The cluster admin
// grants prefixes in the agent's own configuration
// (--faculty-host-path-prefix); a bundle's path is read only when it lies
// lexically under one of them, and then only through an os.Root opened on
// that prefix, so that no symbolic link on the way or in the tree leads a
// read out of it. With no prefix granted, no host path is read at all.
package hostpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/playground-dev/playground/internal/fingerprint"
)

// Setting names where the grants are configured, for messages to whoever
// wrote a bundle that needs one.
const Setting = "--faculty-host-path-prefix, chart value agent.faculties.hostPathPrefixes"

// system are the node's trees that no prefix may be or lie under: the
// kernel's views (/proc holds every process's root, /proc/1/root/etc among
// them) and devices.
var system = []string{"/proc", "/sys", "/dev"}

// ErrNotGranted is matched (errors.Is) by the error of Read for a path
// under no granted prefix.
var ErrNotGranted = errors.New("host path not granted")

type notGranted struct{ msg string }

func (e *notGranted) Error() string        { return e.msg }
func (e *notGranted) Is(target error) bool { return target == ErrNotGranted }

// Grants are the prefixes under which an agent reads host paths. The zero
// value grants none.
type Grants struct {
	prefixes []string // clean, longest first
	private  []string // the agent's own directories
}

// New checks each prefix (Check) and returns the grants. private are the
// agent's own directories (its state directory, which holds every
// sandbox's files and the builds), which no prefix may be, lie under or
// hold.
func New(prefixes []string, private ...string) (Grants, error) {
	g := Grants{private: cleanAll(private)}
	for _, p := range prefixes {
		c, err := Check(p, private...)
		if err != nil {
			return Grants{}, err
		}
		if !slices.Contains(g.prefixes, c) {
			g.prefixes = append(g.prefixes, c)
		}
	}
	// The longest prefix first, so that a path is opened beneath the
	// narrowest grant that holds it.
	slices.SortFunc(g.prefixes, func(a, b string) int { return len(b) - len(a) })
	return g, nil
}

// Prefixes are the granted prefixes, clean.
func (g Grants) Prefixes() []string {
	out := slices.Clone(g.prefixes)
	slices.Sort(out)
	return out
}

// Check says whether prefix may be granted and returns it clean. It must
// be absolute, without "." or ".." elements, and must not be "/", nor be,
// lie under or hold /proc, /sys, /dev or one of private; where it exists
// and leads elsewhere through symbolic links, where it leads is held to
// the same rules.
func Check(prefix string, private ...string) (string, error) {
	c, err := clean(prefix)
	if err != nil {
		return "", fmt.Errorf("host path prefix %q: %w", prefix, err)
	}
	if err := refuse(c, cleanAll(private)); err != nil {
		return "", fmt.Errorf("host path prefix %s: %w", c, err)
	}
	if r := resolve(c); r != c {
		if err := refuse(r, resolveAll(private)); err != nil {
			return "", fmt.Errorf("host path prefix %s leads to %s: %w", c, r, err)
		}
	}
	return c, nil
}

// refuse says why the clean path p cannot be granted, or nil.
func refuse(p string, private []string) error {
	if p == "/" {
		return errors.New("that is the whole node; grant the directory that holds the tools")
	}
	for _, s := range system {
		if within(p, s) {
			return fmt.Errorf("it lies under %s, which is never granted", s)
		}
	}
	for _, s := range private {
		switch {
		case within(p, s):
			return fmt.Errorf("it lies under the agent's own directory %s (sandboxes' files, builds), which is never granted", s)
		case within(s, p):
			return fmt.Errorf("it holds the agent's own directory %s (sandboxes' files, builds), which is never granted", s)
		}
	}
	return nil
}

// within says whether the clean absolute path p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// clean checks that p is an absolute path without "." or ".." elements
// and returns it without repeated or trailing slashes.
func clean(p string) (string, error) {
	if !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return "", errors.New("not an absolute path")
	}
	for _, e := range strings.Split(p, "/") {
		if e == "." || e == ".." {
			return "", fmt.Errorf("it has a %q element", e)
		}
	}
	return filepath.Clean(p), nil
}

func cleanAll(ps []string) []string {
	var out []string
	for _, p := range ps {
		if p != "" {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

// resolve is where the clean absolute path p leads through the symbolic
// links of its longest existing ancestor (p itself when none leads
// elsewhere).
func resolve(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		if dir == "/" {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// resolveAll is each path as it is and where its symbolic links lead.
func resolveAll(ps []string) []string {
	out := cleanAll(ps)
	for _, p := range cleanAll(ps) {
		if r := resolve(p); r != p {
			out = append(out, r)
		}
	}
	return out
}

// Read reads the source tree at p, a bundle's spec.source.hostPath.path,
// as fingerprint.Tree does: beneath the narrowest granted prefix that
// holds p, through an os.Root opened on that prefix. A symbolic link on
// the way from the prefix to p is followed only while it stays beneath
// the prefix (an absolute link never is); links in the tree are recorded,
// not followed. A path under no granted prefix is refused with an error
// that matches ErrNotGranted and says which setting grants it; nothing is
// read then.
func (g Grants) Read(p string) ([]fingerprint.File, error) {
	c, err := clean(p)
	if err != nil {
		return nil, fmt.Errorf("hostPath %q: %w", p, err)
	}
	if len(g.prefixes) == 0 {
		return nil, &notGranted{fmt.Sprintf("hostPath %s is not read: this node's agent allows no host path prefix (%s); ask the cluster admin", c, Setting)}
	}
	i := slices.IndexFunc(g.prefixes, func(pre string) bool { return within(c, pre) })
	if i < 0 {
		return nil, &notGranted{fmt.Sprintf("hostPath %s is not under any prefix this node's agent allows (%s: %s); ask the cluster admin",
			c, Setting, strings.Join(g.Prefixes(), ", "))}
	}
	prefix := g.prefixes[i]
	// The prefix was checked at start; where its links lead now is
	// checked again, as it is opened.
	at := resolve(prefix)
	if err := refuse(at, resolveAll(g.private)); err != nil {
		return nil, fmt.Errorf("hostPath %s: the granted prefix %s leads to %s: %w", c, prefix, at, err)
	}
	root, err := os.OpenRoot(at)
	if err != nil {
		return nil, fmt.Errorf("hostPath %s: opening the granted prefix %s: %w", c, prefix, err)
	}
	defer root.Close()
	if rel := strings.TrimPrefix(strings.TrimPrefix(c, prefix), "/"); rel != "" {
		sub, err := root.OpenRoot(rel)
		if err != nil {
			return nil, fmt.Errorf("hostPath %s: opening %s beneath the granted prefix %s (a symbolic link is followed only while it stays beneath it): %w", c, rel, prefix, err)
		}
		defer sub.Close()
		root = sub
	}
	return fingerprint.Tree(root)
}
