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
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/hostagent/faculty"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// TestFacultyFlagsRefused: the agent refuses, before it starts anything, a
// host path prefix that would grant the node's kernel views, devices, its
// whole tree or the agent's own state, and a maximum build timeout that
// is not positive.
func TestFacultyFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--faculty-host-path-prefix=/"}, "the whole node"},
		{[]string{"--faculty-host-path-prefix=/proc"}, "lies under /proc"},
		{[]string{"--faculty-host-path-prefix=/proc/1/root/etc"}, "lies under /proc"},
		{[]string{"--faculty-host-path-prefix=/opt/tools,/sys/fs/cgroup"}, "lies under /sys"},
		{[]string{"--faculty-host-path-prefix=/opt/tools", "--faculty-host-path-prefix=/dev/shm"}, "lies under /dev"},
		{[]string{"--faculty-host-path-prefix=/opt/../etc"}, `a ".." element`},
		{[]string{"--faculty-host-path-prefix=opt/tools"}, "not an absolute path"},
		{[]string{"--faculty-host-path-prefix=/var/lib/playground"}, "lies under the agent's own directory /var/lib/playground"},
		{[]string{"--faculty-host-path-prefix=/var/lib/playground/faculties"}, "lies under the agent's own directory /var/lib/playground"},
		{[]string{"--faculty-host-path-prefix=/var/lib"}, "holds the agent's own directory /var/lib/playground"},
		{[]string{"--state-dir=/srv/pg", "--faculty-host-path-prefix=/srv"}, "holds the agent's own directory /srv/pg"},
		{[]string{"--faculty-max-build-timeout=0s"}, "--faculty-max-build-timeout: want a positive duration"},
		{[]string{"--faculty-max-build-timeout=-1m"}, "--faculty-max-build-timeout: want a positive duration"},
	} {
		err := runAgent(context.Background(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("playground agent %s: %v; want an error saying %q", strings.Join(c.args, " "), err, c.want)
		} else if strings.Contains(c.args[len(c.args)-1], "prefix") && !strings.HasPrefix(err.Error(), "--faculty-host-path-prefix: ") {
			t.Errorf("playground agent %s: %v; want the flag named first", strings.Join(c.args, " "), err)
		}
	}
}

// TestFileTimeoutRefused: a file operation's bound is a positive
// duration, or the agent does not start.
func TestFileTimeoutRefused(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		err := runAgent(context.Background(), []string{"--file-timeout=" + v})
		if err == nil || !strings.Contains(err.Error(), "--file-timeout: want a positive duration") {
			t.Errorf("playground agent --file-timeout=%s: %v; want a refusal naming the flag", v, err)
		}
	}
}

// TestSigningKeyWaitRefused: the wait of a call for a sandbox's signing
// key is a positive duration, or the agent does not start.
func TestSigningKeyWaitRefused(t *testing.T) {
	for _, v := range []string{"0s", "-1s"} {
		err := runAgent(context.Background(), []string{"--signing-key-wait=" + v})
		if err == nil || !strings.Contains(err.Error(), "--signing-key-wait: want a positive duration") {
			t.Errorf("playground agent --signing-key-wait=%s: %v; want a refusal naming the flag", v, err)
		}
	}
}

// TestImagePoolFlagsRefused: an image named for the warm pools is a
// reference by digest, and the pools' bounds are positive where images
// are pooled, or the agent does not start.
func TestImagePoolFlagsRefused(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--warm-pool-image=registry.test/sys/base:v1"}, "want an image by digest"},
		{[]string{"--warm-pool-image=registry.test/sys/base@sha256:abc"}, "want an image by digest"},
		{[]string{"--warm-pool-images=-1"}, "must not be negative"},
		{[]string{"--warm-pool-images=2", "--warm-pool-images-max=0"}, "must be positive where images are pooled"},
		{[]string{"--warm-pool-image=registry.test/sys/base@" + digest, "--warm-pool-image-size=0"}, "must be positive where images are pooled"},
	} {
		err := runAgent(context.Background(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("playground agent %s: %v; want a refusal saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestFacultyFlagsAccepted: prefixes of tools directories pass, however
// given.
func TestFacultyFlagsAccepted(t *testing.T) {
	var opts nodeagent.Options
	opts.Faculties.MaxTimeout = faculty.DefaultMaxTimeout
	l := cmdflags.StringList(&opts.FacultyHostPathPrefixes)
	for _, v := range []string{"/opt/playground/faculties", "/srv/tools/,/var/lib/playground-tools", "/procedures"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkFacultyFlags(opts, "/var/lib/playground"); err != nil {
		t.Fatal(err)
	}
	opts.Faculties.MaxTimeout = 15 * time.Minute
	if err := checkFacultyFlags(opts, "/var/lib/playground"); err != nil {
		t.Fatal(err)
	}
}
