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
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testFiles checks read and write, which the backend serves in the
// sandbox (its guest, or shell scripts through its Exec), with the
// refusals users see; then their ranged forms and the digest
// (testFileRanges).
func testFiles(t *testing.T, n *node) {
	s := n.open(t, n.spec("files"))
	ctx := context.Background()
	write := func(path, cwd string, data []byte) (hostagent.FileInfo, error) {
		return s.agent.Files().WriteFile(ctx, s.tenant, s.handle, path, cwd, data)
	}
	read := func(path, cwd string) (hostagent.FileContent, error) {
		return s.agent.Files().ReadFile(ctx, s.tenant, s.handle, path, cwd)
	}
	const limit = hostagent.DefaultMaxFileBytes

	t.Run("byte-exact", func(t *testing.T) {
		n.known(t)
		payload := make([]byte, limit)
		_, _ = rand.Read(payload)
		s.sh(t, "mkdir -p work")
		info, err := write("work/blob.bin", "", payload)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(payload)
		if info.Size != len(payload) || info.SHA256 != hex.EncodeToString(sum[:]) || info.Path != guestapi.TenantHome+"/work/blob.bin" {
			t.Fatalf("write answered %+v", info)
		}
		if got := s.sh(t, "sha256sum < work/blob.bin"); got != info.SHA256+"  -\n" {
			t.Fatalf("the sandbox holds other bytes: %s", got)
		}
		got, err := read("blob.bin", "work")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Data, payload) {
			t.Fatalf("read %d bytes that differ from the %d written", len(got.Data), len(payload))
		}
	})

	t.Run("atomic replace", func(t *testing.T) {
		n.known(t)
		a, b := bytes.Repeat([]byte("a"), 256<<10), bytes.Repeat([]byte("b"), 384<<10)
		s.sh(t, "mkdir -p atomic")
		for path, data := range map[string][]byte{"/tmp/A": a, "/tmp/B": b, "atomic/f": a} {
			if _, err := write(path, "", data); err != nil {
				t.Fatal(err)
			}
		}
		s.sh(t, "chmod 640 atomic/f; rm -f /tmp/stop /tmp/reading")
		// A reader that takes one snapshot per open sees the old file or
		// the new one, never a part.
		type result struct {
			agentapi.ExecResult
			err error
		}
		reader := make(chan result, 1)
		// The reader's deadline runs from the moment it is told to stop:
		// it busies the sandbox's CPU until then, and on a slow one (a VM
		// under emulation, a loaded node) the writes take what they take.
		readerCtx, stopReader := context.WithCancel(context.Background())
		defer stopReader()
		go func() {
			res, err := s.agent.Execs().Exec(readerCtx, s.tenant, s.handle, agentapi.ExecRequest{Shell: backend.ShellClean, Command: `n=0; : > /tmp/reading
while [ ! -e /tmp/stop ]; do
  cat atomic/f > /tmp/snap
  cmp -s /tmp/snap /tmp/A || cmp -s /tmp/snap /tmp/B || { echo "torn after $n reads: $(wc -c < /tmp/snap) bytes"; exit 1; }
  n=$((n+1))
done
echo $n`})
			reader <- result{res, err}
		}()
		eventually(t, "the reader starting", func() error {
			if s.sh(t, "[ -e /tmp/reading ] && echo yes || true") == "" {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		for i := range 20 {
			if _, err := write("atomic/f", "", [][]byte{a, b}[i%2]); err != nil {
				t.Fatal(err)
			}
		}
		s.sh(t, "touch /tmp/stop")
		time.AfterFunc(patience, stopReader)
		res := <-reader
		if res.err != nil {
			t.Fatal(res.err)
		}
		if reads, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); res.ExitCode != 0 || err != nil || reads == 0 {
			t.Fatalf("the reader: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if got := s.sh(t, "ls -A atomic; ls -l atomic/f | cut -c1-10"); got != "f\n-rw-r-----\n" {
			t.Fatalf("after the writes: %q, want the one file, its mode kept, and no temporary file", got)
		}
	})

	t.Run("size limit", func(t *testing.T) {
		n.known(t)
		s.sh(t, fmt.Sprintf("echo small > small; head -c %d /dev/zero > big", limit+1))
		_, err := write("small", "", make([]byte, limit+1))
		if hostagent.CodeOf(err) != agentapi.CodeTooLarge {
			t.Fatalf("a write over the limit: %v, want too_large", err)
		}
		_, err = read("big", "")
		if hostagent.CodeOf(err) != agentapi.CodeTooLarge || !strings.Contains(err.Error(), strconv.Itoa(limit+1)) {
			t.Fatalf("reading a file over the limit: %v, want too_large with its size, not a truncated file", err)
		}
		if got := s.sh(t, "cat small; wc -c < big"); got != fmt.Sprintf("small\n%d\n", limit+1) {
			t.Fatalf("a refused call changed the files: %q", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		n.known(t)
		s.sh(t, "mkdir -p dir")
		for _, tc := range []struct {
			name string
			err  error
			code agentapi.Code
		}{
			{"reading a missing file", second(read("nope", "")), agentapi.CodeNotFound},
			{"reading a directory", second(read("dir", "")), agentapi.CodeInvalid},
			{"writing into a missing directory", second(write("no/such/f", "", []byte("x"))), agentapi.CodeNotFound},
			{"writing over a directory", second(write("dir", "", []byte("x"))), agentapi.CodeInvalid},
			// As the tenant: the system's files are not its to change.
			{"writing outside the tenant's directories", second(write("/etc/conformance", "", []byte("x"))), agentapi.CodeInvalid},
		} {
			if hostagent.CodeOf(tc.err) != tc.code {
				t.Errorf("%s: %v (%s), want %s", tc.name, tc.err, hostagent.CodeOf(tc.err), tc.code)
			}
		}
		if got := s.sh(t, "ls /etc/conformance 2>/dev/null; echo done"); got != "done\n" {
			t.Fatalf("a refused write left %q", got)
		}
	})

	t.Run("as the tenant", func(t *testing.T) {
		n.known(t)
		// A file call can do what the tenant's own commands can, no
		// more: init's environment is root's to read, and a call reads
		// it exactly when the tenant's cat can.
		const secret = "/proc/1/environ"
		catReads := s.sh(t, "cat "+secret+" >/dev/null 2>&1 && echo yes || echo no") == "yes\n"
		if _, err := read(secret, ""); (err == nil) != catReads {
			t.Errorf("reading %s: %v; the tenant's cat reads it: %v", secret, err, catReads)
		}
		// A FIFO is refused, not opened: a read of one would wait for a
		// writer for good.
		s.sh(t, "rm -f fifo; mkfifo fifo")
		ctx, cancel := context.WithTimeout(ctx, patience)
		defer cancel()
		if _, err := s.agent.Files().ReadFile(ctx, s.tenant, s.handle, "fifo", ""); hostagent.CodeOf(err) != agentapi.CodeInvalid || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("reading a FIFO: %v, want invalid_argument: not a regular file", err)
		}
		if _, err := s.agent.Files().AppendFile(ctx, s.tenant, s.handle, "fifo", "", []byte("x")); hostagent.CodeOf(err) != agentapi.CodeInvalid || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("appending to a FIFO: %v, want invalid_argument: not a regular file", err)
		}
	})

	t.Run("ways into the pile", func(t *testing.T) {
		n.known(t)
		if !n.be.Capabilities().AppendOnlyPile {
			t.Skip("the backend does not claim an append-only pile")
		}
		before := s.sh(t, "ls -l "+guestapi.PileDir)
		s.sh(t, "mkdir -p esc/sub; ln -sfn "+guestapi.PileDir+" esc/pile; ln -sfn ../../../.."+guestapi.PileDir+" esc/sub/rel")
		for _, path := range []string{
			guestapi.PileDir + "/new",                         // by its name
			"../.." + guestapi.PileDir + "/new",               // by ".." from home
			"esc/pile/new",                                    // through a link to it
			"esc/sub/rel/new",                                 // through a relative link
			"esc/sub/../pile/new",                             // "..", then a link
			"esc/sub/rel/../" + guestapi.PileDir[1:] + "/new", // a link, then ".."
		} {
			if _, err := write(path, "", []byte("x")); hostagent.CodeOf(err) != agentapi.CodeInvalid || !strings.Contains(fmt.Sprint(err), "the pile ("+guestapi.PileDir+")") {
				t.Errorf("writing %s: %v, want invalid_argument saying it is the pile", path, err)
			}
		}
		if got := s.sh(t, "ls -l "+guestapi.PileDir); got != before {
			t.Fatalf("the pile after the refusals: %q, was %q", got, before)
		}
	})

	testFileRanges(t, n, s)

	t.Run("bounded in time", func(t *testing.T) {
		n.known(t)
		// A sparse file of 1 TiB, whose digest reads zeros for many
		// minutes (the attack: a digest of one ran on for good after its
		// client left).
		s.sh(t, "truncate -s 1T huge")
		defer s.sh(t, "rm -f huge")
		// A digest is a script's sha256sum (sha256 -q) where the
		// backend runs file calls as shell scripts, else the guest's
		// thread that serves it, named for it.
		digesters := func(s *session) int {
			sh := s.shell(t)
			threads, _ := strconv.Atoi(strings.TrimSpace(sh(`for f in /proc/[0-9]*/task/*/comm; do cat "$f"; done 2>/dev/null | grep -cx '` + guestapi.FileThreadName(filecall.Digest) + `' || true`)))
			return running(sh, "sha256sum") + running(sh, "sha256 -q") + threads
		}

		// The call ends (its client went): the digest is killed before
		// the call returns.
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := s.agent.Files().DigestFile(ctx, s.tenant, s.handle, "huge", "")
			errc <- err
		}()
		eventually(t, "the digest to run", func() error {
			select {
			case err := <-errc:
				t.Fatalf("the digest of 1 TiB returned at once: %v", err)
			default:
			}
			if n := digesters(s); n != 1 {
				return fmt.Errorf("%d digests running", n)
			}
			return nil
		})
		cancel()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatal("a digest of 1 TiB whose call ended succeeded")
			}
		case <-time.After(patience):
			t.Fatalf("the digest's call ended, and it did not return within %v", patience)
		}
		if n := digesters(s); n != 0 {
			t.Errorf("%d digests still run after their call ended", n)
		}

		// On a kernel whose file operations may take 2 s, the bound
		// passes: the call fails saying so, and the digest is gone.
		const bound = 2 * time.Second
		b := n.h.newNodeWith(t, hostagent.Options{FileTimeout: bound})
		bs := b.open(t, b.spec("files-bounded"))
		bs.sh(t, "truncate -s 1T huge")
		ctx, cancel = context.WithTimeout(context.Background(), patience)
		defer cancel()
		start := time.Now()
		_, err := bs.agent.Files().DigestFile(ctx, bs.tenant, bs.handle, "huge", "")
		took := time.Since(start)
		if hostagent.CodeOf(err) != agentapi.CodeUnavailable || !strings.Contains(err.Error(), "--file-timeout") || !strings.Contains(err.Error(), "sha256 of each range") {
			t.Errorf("a digest past the bound: %v (%s, after %v); want unavailable, naming --file-timeout and what to do", err, hostagent.CodeOf(err), took)
		}
		if took < bound {
			t.Errorf("the digest ended after %v, before the bound of %v", took, bound)
		}
		if n := digesters(bs); n != 0 {
			t.Errorf("%d digests still run past the bound", n)
		}
	})
}

func second[T any](_ T, err error) error { return err }
