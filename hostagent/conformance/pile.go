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

package conformance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testPile checks the tenant's pile: append-only inside the sandbox, the
// same bytes in the host directory PileDir names, and kept by Destroy when
// the tenant's reclaim policy retains it.
func testPile(t *testing.T, n *node) {
	if !n.be.Capabilities().AppendOnlyPile {
		t.Skip("the backend does not claim an append-only pile")
	}
	ctx := context.Background()
	be, sp := n.be, n.spec("pile")
	start(t, be, sp)
	// The backend makes the pile's files; the tenant only appends.
	name, _, _ := strings.Cut(Sh(t, be, sp.ID, "ls "+guestapi.PileDir), "\n")
	if name == "" {
		t.Fatalf("the pile %s has no file to append to", guestapi.PileDir)
	}
	f := guestapi.PileDir + "/" + name

	t.Run("append-only", func(t *testing.T) {
		n.known(t)
		Sh(t, be, sp.ID, "echo one >> "+f+" && printf two >> "+f)
		for _, cmd := range []string{
			": > " + f,
			"echo overwrite > " + f,
			"printf X | dd of=" + f + " conv=notrunc status=none",
			"truncate -s 0 " + f,
			"rm -f " + f,
			"mv " + f + " " + guestapi.PileDir + "/moved",
			"ln " + f + " /tmp/link",
			"chmod 600 " + f,
			"chattr -a " + f,
			"touch " + guestapi.PileDir + "/new-file",
		} {
			if r := Exec(t, be, sp.ID, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
				t.Errorf("%q succeeded in the pile", cmd)
			}
		}
		if got := Sh(t, be, sp.ID, "cat "+f+"; ls "+guestapi.PileDir); got != "one\ntwo"+name+"\n" {
			t.Fatalf("the pile after the refusals: %q", got)
		}
		if data, err := backend.ReadPileFile(be, sp.ID, name); err != nil || string(data) != "one\ntwo" {
			t.Fatalf("the pile seen from the host: %q, %v", data, err)
		}
	})

	t.Run("kept by destroy", func(t *testing.T) {
		n.known(t)
		Sh(t, be, sp.ID, "echo entry >> "+f+"; echo scratch > ~/scratch")
		want := Sh(t, be, sp.ID, "cat "+f)
		if err := be.Destroy(ctx, sp.ID, true); err != nil {
			t.Fatal(err)
		}
		start(t, be, sp)
		if got := Sh(t, be, sp.ID, "cat "+f+"; ls ~ | wc -l"); got != want+"0\n" {
			t.Fatalf("provisioned again after Destroy keeping the pile: %q, want the pile %q and an empty home", got, want)
		}
		if err := be.Destroy(ctx, sp.ID, false); err != nil {
			t.Fatal(err)
		}
		start(t, be, sp)
		if got := Sh(t, be, sp.ID, "cat "+guestapi.PileDir+"/*"); got != "" {
			t.Fatalf("provisioned again after Destroy without the pile: it holds %q", got)
		}
	})
}

// testSigningKey checks the tenant's signing key, on backends that keep
// one: /pile/self.key holds what InstallSigningKey was given, the tenant
// reads it and can neither change nor remove it, a new key replaces it
// (at once when the backend says live, else from the next start), and it
// is kept with the pile by a restart and a Destroy that keeps the pile.
func testSigningKey(t *testing.T, n *node) {
	holder := n.be.Capabilities().SigningKeyHolder
	if holder == nil {
		t.Skip("the backend keeps no signing key")
	}
	ctx := context.Background()
	be, sp := n.be, n.spec("key")
	start(t, be, sp)
	keyFile := guestapi.PileDir + "/" + guestapi.SigningKeyFile
	install := func(t *testing.T, key string) (live bool) {
		t.Helper()
		live, err := holder.InstallSigningKey(ctx, sp.ID, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if !live {
			if err := be.Stop(ctx, sp.ID); err != nil {
				t.Fatal(err)
			}
			start(t, be, sp)
		}
		return live
	}
	key1, key2 := strings.Repeat("0123456789abcdef", 4), strings.Repeat("fedcba9876543210", 4)

	t.Run("read-only to the tenant", func(t *testing.T) {
		n.known(t)
		install(t, key1)
		if got := Sh(t, be, sp.ID, "cat "+keyFile+"; echo; "+statModeOwner(keyFile)); got != key1+"\n400 "+strconv.Itoa(guestapi.TenantUID)+"\n" {
			t.Fatalf("the key as the tenant sees it: %q", got)
		}
		for _, cmd := range []string{
			"echo x > " + keyFile,
			"echo x >> " + keyFile,
			"truncate -s 0 " + keyFile,
			// gVisor answers a chmod of an immutable file with success
			// and changes nothing: what counts is that no write follows.
			"chmod 600 " + keyFile + " && echo x >> " + keyFile,
			"rm -f " + keyFile,
			"mv " + keyFile + " " + guestapi.PileDir + "/moved",
			"ln " + keyFile + " /tmp/link",
			"chattr -i " + keyFile,
		} {
			if r := Exec(t, be, sp.ID, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
				t.Errorf("%q succeeded on the signing key", cmd)
			}
		}
		if got := Sh(t, be, sp.ID, "cat "+keyFile+"; echo; "+statMode(keyFile)); got != key1+"\n400\n" {
			t.Fatalf("the key after the refusals: %q", got)
		}
		if data, err := backend.ReadPileFile(be, sp.ID, guestapi.SigningKeyFile); err != nil || string(data) != key1 {
			t.Fatalf("the key seen from the host: %v", err)
		}
	})

	t.Run("replaced", func(t *testing.T) {
		n.known(t)
		// A process that runs through a live replacement runs on after it
		// (a backend may hold the sandbox's processes still meanwhile).
		Sh(t, be, sp.ID, "setsid sh -c 'while :; do echo tick >> /tmp/ticks; sleep 0.05; done' </dev/null >/dev/null 2>&1 &")
		ticks := func() string { return Sh(t, be, sp.ID, "cat /tmp/ticks 2>/dev/null | wc -l") }
		// The loop runs before the key is replaced: its first tick is written.
		eventually(t, "the loop's first tick", func() error {
			if ticks() == "0\n" {
				return errors.New("no tick yet")
			}
			return nil
		})
		if install(t, key2) {
			before := ticks()
			eventually(t, "the ticks to go on after the key's replacement", func() error {
				if now := ticks(); now == before {
					return errors.New("no new tick")
				}
				return nil
			})
		}
		if got := Sh(t, be, sp.ID, "cat "+keyFile+"; echo; "+statMode(keyFile)); got != key2+"\n400\n" {
			t.Fatalf("the key after its rotation: %q", got)
		}
		if _, err := holder.InstallSigningKey(ctx, sp.ID, []byte("not a key")); err == nil {
			t.Fatal("a malformed key was installed")
		}
		if _, err := holder.InstallSigningKey(ctx, "no-such-sandbox", []byte(key1)); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("a key for an unknown sandbox: %v, want ErrNotFound", err)
		}
	})

	t.Run("kept with the pile", func(t *testing.T) {
		n.known(t)
		if err := be.Stop(ctx, sp.ID); err != nil {
			t.Fatal(err)
		}
		start(t, be, sp)
		if got := Sh(t, be, sp.ID, "cat "+keyFile); got != key2 {
			t.Fatalf("the key after a restart: %q", got)
		}
		if err := be.Destroy(ctx, sp.ID, true); err != nil {
			t.Fatal(err)
		}
		start(t, be, sp)
		if got := Sh(t, be, sp.ID, "cat "+keyFile+"; echo; "+statMode(keyFile)); got != key2+"\n400\n" {
			t.Fatalf("the key after a Destroy that kept the pile: %q", got)
		}
		if err := be.Destroy(ctx, sp.ID, false); err != nil {
			t.Fatal(err)
		}
		start(t, be, sp)
		if got := Sh(t, be, sp.ID, "ls "+guestapi.PileDir); strings.Contains(got, guestapi.SigningKeyFile) {
			t.Fatalf("the key outlived its pile: %q", got)
		}
	})
}

// statModeOwner prints a file's permission bits and owner's UID, with GNU
// stat or FreeBSD's.
func statModeOwner(f string) string {
	return "stat -c '%a %u' " + f + " 2>/dev/null || stat -f '%Lp %u' " + f
}

// statMode prints a file's permission bits, with GNU stat or FreeBSD's.
func statMode(f string) string {
	return "stat -c %a " + f + " 2>/dev/null || stat -f %Lp " + f
}

// testSharedPile checks a faculty marked SharedPile, on backends that
// mount one: its files at /pile/shared, read-only, nothing of it on the
// PATH, the tenant's own pile beside it as it was.
func testSharedPile(t *testing.T, n *node) {
	if !n.be.Capabilities().SharedPile {
		t.Skip("the backend mounts no shared pile")
	}
	dir := HostDir(t, map[string]string{"shared.pile": "the platform's records\n"})
	sp := n.spec("shared")
	sp.Faculties = []backend.Faculty{{Name: "commons", Fingerprint: "fp-commons", Dir: dir, Binaries: []string{"shared.pile"}, SharedPile: true}}
	start(t, n.be, sp)
	f := guestapi.SharedPileDir + "/shared.pile"
	if got := Sh(t, n.be, sp.ID, "cat "+f+"; ls "+guestapi.SharedPileDir+"; command -v shared.pile || echo not on PATH"); got != "the platform's records\nshared.pile\nnot on PATH\n" {
		t.Fatalf("the shared pile inside: %q", got)
	}
	for _, cmd := range []string{
		"echo x >> " + f,
		"echo x > " + f,
		"rm -f " + f,
		"mv " + f + " " + guestapi.SharedPileDir + "/moved",
		"touch " + guestapi.SharedPileDir + "/new",
		"chmod 666 " + f + " && echo x >> " + f,
		f,
	} {
		if r := Exec(t, n.be, sp.ID, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
			t.Errorf("%q succeeded on the shared pile", cmd)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "shared.pile")); err != nil || string(data) != "the platform's records\n" {
		t.Fatalf("the shared pile on the node after the refusals: %q, %v", data, err)
	}
}
