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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/internal/connlimit"
	"github.com/playground-dev/playground/internal/netnstest"
)

// TestResolverConnectionFlood is the attack of a tenant on its node's
// open files through its own resolver: 20,000 TCP connections from its
// sandbox's network to the resolver its agent runs for it. The agent
// holds at most EgressNodeConns of them (the rest wait in the kernel's
// queue, and past four times that bound the sandbox's nftables ruleset
// refuses new ones), so the agent's open files stay far below its budget,
// and another tenant's sandbox is served throughout: its commands run and
// its resolver answers. (The resolver held every connection it was
// offered, 12,707 of the agent's 20,000 files in a live attack.)
func TestResolverConnectionFlood(t *testing.T) {
	requireRunc(t)
	_, w := egressWorld(t)
	w.serveZone(t, map[string][]string{"allowed.test.": {"allowed.test. 60 IN A " + worldServer}})
	const perSandbox = 16
	b, err := New(Options{StateDir: newStateDir(t), GuestBinary: guestBinary, Runtime: testRuntime, Network: NetworkEgress,
		EgressResolvers: []string{worldServer + ":53"}, EgressNodeConns: perSandbox})
	if err != nil {
		t.Fatal(err)
	}
	rules := []backend.EgressRule{{Host: "allowed.test", Ports: []int32{allowedPort}}}
	startSandbox(t, b, backend.Spec{ID: "flood", Tenant: "team-a/mallory", Egress: rules})
	startSandbox(t, b, backend.Spec{ID: "calm", Tenant: "team-b/alice", Egress: rules})
	sb, err := b.load("flood")
	if err != nil {
		t.Fatal(err)
	}
	n := b.egressNet(sb)
	resolver := net.JoinHostPort(n.node.String(), "53")

	// The other tenant is served throughout: a command and a lookup
	// through its own resolver, again and again while the flood runs.
	stop := make(chan struct{})
	var calmed sync.WaitGroup
	var served atomic.Int64
	calmed.Add(1)
	go func() {
		defer calmed.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			r, err := execIn(ctx, b, "calm", "getent ahostsv4 allowed.test | head -n 1")
			cancel()
			if err != nil || !strings.Contains(r, worldServer) {
				t.Errorf("the other tenant's lookup during the flood: %q, %v", r, err)
				return
			}
			served.Add(1)
		}
	}()

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	refused, timedOut := 0, 0
	(&netnstest.World{Net: n.netns}).In(t, func() error {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		for range 20000 {
			c, err := d.Dial("tcp4", resolver)
			switch {
			case err == nil:
				held = append(held, c)
			case errors.Is(err, syscall.ECONNREFUSED):
				refused++
			case errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
				timedOut++
			default:
				return fmt.Errorf("connection %d: %w", len(held)+refused+timedOut, err)
			}
		}
		return nil
	})
	// The agent's files for the flood: its end of the connections to the
	// resolver's address.
	agentFiles := acceptedFiles(t, netip.AddrPortFrom(n.node, 53))
	t.Logf("20000 connections: %d held by the sandbox, %d refused by its ruleset, %d timed out; the agent holds %d of them (%d files of its budget of %d)",
		len(held), refused, timedOut, agentFiles, connlimit.Process().InUse(), connlimit.Process().Limit())
	if agentFiles > perSandbox {
		t.Errorf("the agent holds %d of the flood's connections, want at most the sandbox's %d", agentFiles, perSandbox)
	}
	if connlimit.Process().InUse() > connlimit.Process().Limit() {
		t.Errorf("the process holds %d connections, past its budget of %d", connlimit.Process().InUse(), connlimit.Process().Limit())
	}
	if most := 4*perSandbox + 8; len(held) > most {
		t.Errorf("the sandbox holds %d connections to its node, want at most about %d: its ruleset's bound does not hold", len(held), most)
	}
	if refused == 0 {
		t.Error("no connection was refused by the sandbox's ruleset")
	}
	close(stop)
	calmed.Wait()
	if served.Load() == 0 {
		t.Error("the other tenant was not served during the flood")
	}
	// The flooding sandbox's resolver serves it again once it lets go.
	for _, c := range held {
		c.Close()
	}
	held = nil
	for deadline := time.Now().Add(30 * time.Second); ; {
		r, err := execIn(context.Background(), b, "flood", "getent ahostsv4 allowed.test | head -n 1")
		if err == nil && strings.Contains(r, worldServer) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flooding sandbox's resolver does not answer it after the flood: %q, %v", r, err)
		}
	}
}

// execIn runs command in sandbox id within ctx and returns its stdout.
func execIn(ctx context.Context, b *Backend, id, command string) (string, error) {
	s := conformance.NewSink()
	p, err := b.Exec(ctx, id, backend.ExecRequest{Shell: backend.ShellClean, Command: command}, s)
	if err != nil {
		return "", err
	}
	st, err := p.Wait(ctx)
	if err != nil {
		return "", err
	}
	if st.ExitCode != 0 {
		return s.Stdout(), fmt.Errorf("%q exited %d: %s", command, st.ExitCode, s.Stderr())
	}
	return s.Stdout(), nil
}

// acceptedFiles counts this process's open files that are TCP sockets
// accepted at local (in the node's network namespace, /proc/net/tcp):
// connections, not the listener.
func acceptedFiles(t *testing.T, local netip.AddrPort) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	a := local.Addr().As4()
	// /proc/net/tcp prints an IPv4 address as the 32-bit number in host
	// (little-endian) order, then the port.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], local.Port())
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		const listen = "0A"
		if len(f) > 9 && f[1] == want && f[3] != listen {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && inodes[target] {
			n++
		}
	}
	return n
}

// TestGateConnectionBound: a sandbox holds at most EgressNodeConns
// connections through its server-name gate (those redirected to it wait
// there for their TLS ClientHello); its next is closed at once, while
// another sandbox's gate takes its own.
func TestGateConnectionBound(t *testing.T) {
	requireRunc(t)
	_, w := egressWorld(t)
	w.serveZone(t, map[string][]string{"secure.test.": {"secure.test. 60 IN A " + worldServer}})
	w.serveHTTPS(t, worldServer+":"+strconv.Itoa(httpsPort), "secure.test")
	const perSandbox = 4
	b, err := New(Options{StateDir: newStateDir(t), GuestBinary: guestBinary, Runtime: testRuntime, Network: NetworkEgress,
		EgressResolvers: []string{worldServer + ":53"}, EgressNodeConns: perSandbox})
	if err != nil {
		t.Fatal(err)
	}
	rules := []backend.EgressRule{{Host: "secure.test", Ports: []int32{httpsPort}, CheckServerName: true}}
	for _, id := range []string{"greedy", "other"} {
		startSandbox(t, b, backend.Spec{ID: id, Tenant: "team/" + id, Egress: rules})
		// The answer opens the address to the gate.
		if out, err := execIn(context.Background(), b, id, "getent ahostsv4 secure.test | head -n 1"); err != nil || !strings.Contains(out, worldServer) {
			t.Fatalf("%s: resolving secure.test: %q, %v", id, out, err)
		}
	}
	// open dials n connections to the checked address from sandbox id's
	// network, sending nothing, and says of each whether the gate closed
	// it at once (it waits 5 s for a ClientHello on those it holds).
	open := func(id string, n int) []bool {
		sb, err := b.load(id)
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		(&netnstest.World{Net: b.egressNet(sb).netns}).In(t, func() error {
			for range n {
				c, err := net.DialTimeout("tcp4", net.JoinHostPort(worldServer, strconv.Itoa(httpsPort)), 5*time.Second)
				if err != nil {
					return err
				}
				conns = append(conns, c)
			}
			return nil
		})
		closed := make([]bool, n)
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Go(func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				_, err := c.Read(make([]byte, 1))
				closed[i] = err == io.EOF
			})
		}
		wg.Wait()
		return closed
	}
	var greedy, other []bool
	var wg sync.WaitGroup
	wg.Go(func() { greedy = open("greedy", 3*perSandbox) })
	wg.Go(func() { other = open("other", perSandbox) })
	wg.Wait()
	held := 0
	for _, c := range greedy {
		if !c {
			held++
		}
	}
	if held != perSandbox {
		t.Errorf("the gate holds %d of the greedy sandbox's %d connections, want its %d", held, len(greedy), perSandbox)
	}
	for i, c := range other {
		if c {
			t.Errorf("the other sandbox's connection %d was closed: its gate's room was taken", i)
		}
	}
}
