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
	"flag"
	"fmt"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/lima"
)

// limaFlags are the agent's flags for the lima backend, which is off
// unless --limactl is given.
type limaFlags struct {
	limactl string
	user    string
	home    string
}

func registerLimaFlags(fs *flag.FlagSet) *limaFlags {
	f := &limaFlags{}
	fs.StringVar(&f.limactl, "limactl", "", "limactl, to offer the lima backend (a Lima VM per Sandbox of backend lima): its path, or a name looked up on PATH; empty (the default): no lima backend. Built to limactl's contract, see docs/lima.md")
	fs.StringVar(&f.user, "lima-user", "", "with --limactl, the unprivileged user limactl runs as when the agent runs as root (limactl refuses root); it owns --lima-home")
	fs.StringVar(&f.home, "lima-home", "", "with --limactl, LIMA_HOME of the lima backend's VMs and disks (default: <state-dir>/lima/home; keep it short, a VM's socket path is under it)")
	return f
}

// backend is the lima backend the flags ask for, or nil when they do not.
func (f *limaFlags) backend(stateDir, guestBinary string) (backend.Backend, error) {
	if f.limactl == "" {
		if f.user != "" || f.home != "" {
			return nil, fmt.Errorf("--lima-user and --lima-home need --limactl")
		}
		return nil, nil
	}
	path := f.limactl
	if !strings.ContainsRune(path, filepath.Separator) {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("--limactl=%s: %w: install Lima (https://lima-vm.io) or name limactl's path", f.limactl, err)
		}
		path = p
	}
	opts := lima.Options{StateDir: filepath.Join(stateDir, "lima"), LimaHome: f.home, Limactl: path, GuestBinary: guestBinary}
	if opts.LimaHome == "" {
		opts.LimaHome = filepath.Join(opts.StateDir, "home")
	}
	if f.user != "" {
		u, err := user.Lookup(f.user)
		if err != nil {
			return nil, fmt.Errorf("--lima-user: %w", err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--lima-user=%s: uid %q, gid %q are not numbers", f.user, u.Uid, u.Gid)
		}
		opts.RunAs = &lima.RunAs{UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	}
	be, err := lima.New(opts)
	if err != nil {
		return nil, fmt.Errorf("the lima backend: %w", err)
	}
	return be, nil
}
