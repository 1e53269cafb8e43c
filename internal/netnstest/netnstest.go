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

// Package netnstest stands up, for a test, a world of test hosts in a
// network namespace of its own joined to the node by a veth pair: the
// only place, beside loopback, network tests send traffic to. Servers in
// it (TCP, DNS, HTTPS) are made on its addresses from the test's process.
package netnstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/internal/sysctltest"
)

// World is a network namespace of test hosts.
type World struct {
	// Net is the namespace's file.
	Net string
	// Node is the node's address on the link to it.
	Node string
	// Node6 is the node's IPv6 address on it, once AddIPv6 gave one.
	Node6     string
	name, dev string
}

var worlds atomic.Int32

// New makes a world on subnet (an IPv4 /24 prefix such as "198.19.77",
// which no other test of the machine uses): the node is subnet.254, and
// the world holds each of hosts (last octets) and routes back through the
// node. It goes when the test ends.
func New(t testing.TB, subnet string, hosts ...int) *World {
	t.Helper()
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run make prereqs", tool)
		}
	}
	name := fmt.Sprintf("pgtest%d-%d", os.Getpid()%100000, worlds.Add(1))
	dev := fmt.Sprintf("pgw%d-%d", os.Getpid()%100000, worlds.Load())
	w := &World{Net: "/run/netns/" + name, Node: subnet + ".254", name: name, dev: dev}
	sysctltest.HoldIPv4Forwarding(t)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", dev).Run()
		_ = exec.Command("ip", "netns", "del", name).Run()
	})
	in := func(args ...string) []string { return append([]string{"ip", "netns", "exec", name}, args...) }
	steps := [][]string{
		{"ip", "netns", "add", name},
		in("ip", "link", "add", "eth0", "type", "veth", "peer", "name", dev, "netns", "1"),
		{"ip", "addr", "add", w.Node + "/24", "dev", dev},
		{"ip", "link", "set", dev, "up"},
		in("ip", "link", "set", "lo", "up"),
	}
	for _, h := range hosts {
		steps = append(steps, in("ip", "addr", "add", fmt.Sprintf("%s.%d/24", subnet, h), "dev", "eth0"))
	}
	steps = append(steps, in("ip", "link", "set", "eth0", "up"), in("ip", "route", "add", "default", "via", w.Node))
	for _, c := range steps {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	return w
}

// AddIPv6 gives the world IPv6 on prefix (a /64 written as "2001:2::",
// which no other test of the machine uses): the node is prefix+fe, the
// world holds each of hosts (the last group, "1") and routes back
// through the node. It skips the test where the machine has no IPv6.
func (w *World) AddIPv6(t testing.TB, prefix string, hosts ...string) {
	t.Helper()
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Skip("this machine has no IPv6")
	}
	w.Node6 = prefix + "fe"
	in := func(args ...string) []string { return append([]string{"ip", "netns", "exec", w.name}, args...) }
	steps := [][]string{
		{"ip", "-6", "addr", "add", w.Node6 + "/64", "dev", w.dev, "nodad"},
	}
	for _, h := range hosts {
		steps = append(steps, in("ip", "-6", "addr", "add", prefix+h+"/64", "dev", "eth0", "nodad"))
	}
	steps = append(steps, in("ip", "-6", "route", "add", "default", "via", w.Node6))
	for _, c := range steps {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
}

// In runs fn on a thread in the world: the sockets it makes are the
// world's, served from any thread.
func (w *World) In(t testing.TB, fn func() error) {
	t.Helper()
	c := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			c <- err
			return
		}
		defer orig.Close()
		ns, err := os.Open(w.Net)
		if err != nil {
			runtime.UnlockOSThread()
			c <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			c <- err
			return
		}
		err = fn()
		// A thread that cannot leave stays locked and ends with the
		// goroutine.
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		c <- err
	}()
	if err := <-c; err != nil {
		t.Fatalf("in the world namespace %s: %v", w.Net, err)
	}
}

// Listen makes a TCP listener on addr in the world.
func (w *World) Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	w.In(t, func() (err error) {
		var lc net.ListenConfig
		l, err = lc.Listen(context.Background(), "tcp", addr)
		return err
	})
	t.Cleanup(func() { l.Close() })
	return l
}

// ServeZone answers DNS queries on addr (UDP, port 53 usually) from
// records ("name. ttl IN A addr"), NXDOMAIN for other names.
func (w *World) ServeZone(t testing.TB, addr string, records map[string][]string) {
	t.Helper()
	var pc net.PacketConn
	w.In(t, func() (err error) {
		var lc net.ListenConfig
		pc, err = lc.ListenPacket(context.Background(), "udp", addr)
		return err
	})
	s := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		rrs, ok := records[strings.ToLower(q.Question[0].Name)]
		if !ok {
			m.SetRcode(q, dns.RcodeNameError)
		}
		for _, r := range rrs {
			if rr, err := dns.NewRR(r); err == nil && (q.Question[0].Qtype == dns.TypeA || rr.Header().Rrtype != dns.TypeA) {
				m.Answer = append(m.Answer, rr)
			}
		}
		_ = rw.WriteMsg(m)
	})}
	go func() { _ = s.ActivateAndServe() }()
	t.Cleanup(func() { _ = s.Shutdown() })
}

// ServeHTTPS serves h over HTTPS on addr in the world, with a certificate
// for name from a CA of its own, which it returns.
func (w *World) ServeHTTPS(t testing.TB, addr, name string, h http.Handler) *x509.CertPool {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA of " + name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	l := tls.NewListener(w.Listen(t, addr), &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}
