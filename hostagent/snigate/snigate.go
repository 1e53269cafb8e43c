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

// Package snigate is the check of the TLS server name at the node for a
// sandbox's egress by name: the sandbox's connections to the addresses a
// name with such a check answered are redirected (nftables DNAT) to the
// gate, which reads the connection's TLS ClientHello, lets it through to
// its original destination only if the server name it carries (SNI) is a
// name that answered that address and that the rules check, and splices
// the bytes both ways without terminating TLS. A connection that names
// another host (fronting on a shared CDN address), or none (an address
// typed by hand), is refused. Connections are bounded per sandbox.
package snigate

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/duplex"
	"github.com/playground-dev/playground/internal/connlimit"
)

// maxHello bounds what the gate reads of a ClientHello.
const maxHello = 16 << 10

// Options configure a Gate.
type Options struct {
	// Listen is where the sandbox's redirected connections arrive, and
	// Listen6, when valid, where its IPv6 ones do.
	Listen, Listen6 netip.AddrPort
	// Allowed says whether a connection to dst that names serverName
	// goes through.
	Allowed func(dst netip.AddrPort, serverName string) bool
	// Denied says whether an address must never be dialled.
	Denied func(netip.Addr) bool
	// Terminate, when not nil, may take a connection let through instead
	// of splicing it: for a server name it returns whoever serves it (a
	// credential broker, which ends its TLS), given the connection, the
	// ClientHello read from it and its original destination; nil
	// splices.
	Terminate func(serverName string) func(c net.Conn, hello []byte, dst netip.AddrPort)
	// Record receives each connection's fate: its destination, the name
	// it carried, and why it was refused ("" when let through).
	Record func(dst netip.AddrPort, serverName, refused string)
	// MaxConns bounds the connections through the gate at once (default
	// 64); past it a connection is closed at once.
	MaxConns int
	// HelloTimeout bounds the wait for a ClientHello (default 5 s).
	HelloTimeout time.Duration
}

// Gate is a running gate of one sandbox.
type Gate struct {
	opts  Options
	lns   []net.Listener
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Start listens on opts.Listen and serves until Close.
func Start(opts Options) (*Gate, error) {
	if opts.Allowed == nil || opts.Denied == nil {
		return nil, errors.New("snigate: Allowed and Denied are required")
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 5 * time.Second
	}
	g := &Gate{opts: opts, slots: make(chan struct{}, opts.MaxConns), conns: map[net.Conn]struct{}{}}
	var lc net.ListenConfig
	for _, at := range []netip.AddrPort{opts.Listen, opts.Listen6} {
		if !at.IsValid() {
			continue
		}
		ln, err := lc.Listen(context.Background(), "tcp", at.String())
		if err != nil {
			for _, l := range g.lns {
				l.Close()
			}
			return nil, fmt.Errorf("snigate: %w", err)
		}
		// Each connection is charged to the process's connection budget;
		// MaxConns bounds the sandbox's below.
		g.lns = append(g.lns, connlimit.Listen(ln, connlimit.Options{Name: "gate"}))
	}
	for _, ln := range g.lns {
		g.wg.Add(1)
		go g.serve(ln)
	}
	return g, nil
}

// Close stops the gate and ends the connections through it.
func (g *Gate) Close() error {
	var err error
	for _, ln := range g.lns {
		err = errors.Join(err, ln.Close())
	}
	g.mu.Lock()
	for c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
	return err
}

func (g *Gate) serve(ln net.Listener) {
	defer g.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case g.slots <- struct{}{}:
		default:
			g.record(netip.AddrPort{}, "", "too many connections through the gate")
			c.Close()
			continue
		}
		g.track(c, true)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer func() { <-g.slots }()
			defer g.track(c, false)
			defer c.Close() // and gives back its part of the budget
			// The TCP connection itself: its original destination, its
			// half-close and the kernel's splice.
			g.handle(c.(*connlimit.Conn).NetConn())
		}()
	}
}

func (g *Gate) track(c net.Conn, add bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if add {
		g.conns[c] = struct{}{}
	} else {
		delete(g.conns, c)
	}
}

func (g *Gate) record(dst netip.AddrPort, name, refused string) {
	if g.opts.Record != nil {
		g.opts.Record(dst, name, refused)
	}
}

// handle checks one connection and, if it may, splices it to its
// original destination.
func (g *Gate) handle(c net.Conn) {
	dst, err := originalDst(c)
	if err != nil {
		g.record(netip.AddrPort{}, "", "no original destination: "+err.Error())
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(g.opts.HelloTimeout))
	var hello bytes.Buffer
	name, err := serverName(io.TeeReader(io.LimitReader(c, maxHello), &hello))
	if err != nil {
		g.record(dst, "", "no TLS ClientHello with a server name: "+err.Error())
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case g.opts.Denied(dst.Addr()):
		g.record(dst, name, "the destination is one egress never opens")
		return
	case !g.opts.Allowed(dst, name):
		g.record(dst, name, fmt.Sprintf("the connection names %q, which did not answer %s or is not checked on its port", name, dst))
		return
	}
	if g.opts.Terminate != nil {
		if serve := g.opts.Terminate(name); serve != nil {
			serve(c, hello.Bytes(), dst)
			return
		}
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	up, err := d.DialContext(context.Background(), "tcp", dst.String())
	if err != nil {
		g.record(dst, name, "dialling the destination: "+err.Error())
		return
	}
	g.track(up, true)
	defer g.track(up, false)
	defer up.Close()
	g.record(dst, name, "")
	if _, err := up.Write(hello.Bytes()); err != nil {
		return
	}
	duplex.Relay(up, c)
}

// errHello stops the handshake once the ClientHello is read.
var errHello = errors.New("client hello read")

// serverName reads a TLS ClientHello from r and returns the server name
// it carries, lower case.
func serverName(r io.Reader) (string, error) {
	var name string
	err := tls.Server(readOnly{r}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errHello
	}}).HandshakeContext(context.Background())
	if !errors.Is(err, errHello) {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return "", err
	}
	if name == "" {
		return "", errors.New("the ClientHello names no server")
	}
	return strings.ToLower(name), nil
}

// readOnly is a net.Conn that reads r and writes nothing.
type readOnly struct{ r io.Reader }

func (c readOnly) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnly) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (readOnly) Close() error                     { return nil }
func (readOnly) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (readOnly) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (readOnly) SetDeadline(time.Time) error      { return nil }
func (readOnly) SetReadDeadline(time.Time) error  { return nil }
func (readOnly) SetWriteDeadline(time.Time) error { return nil }

// ip6tSoOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h).
const ip6tSoOriginalDst = 80

// originalDst is a redirected connection's destination before the DNAT
// (SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var addr netip.AddrPort
	var serr error
	local, _ := c.LocalAddr().(*net.TCPAddr)
	v6 := local != nil && local.IP.To4() == nil
	err = raw.Control(func(fd uintptr) {
		if v6 {
			// struct sockaddr_in6 (IP6T_SO_ORIGINAL_DST), read through
			// the 32 bytes of an ip6_mtuinfo, the usual way from Go.
			m, err := unix.GetsockoptIPv6MTUInfo(int(fd), syscall.IPPROTO_IPV6, ip6tSoOriginalDst)
			if err != nil {
				serr = err
				return
			}
			// The port is in memory in network order.
			var raw [2]byte
			binary.NativeEndian.PutUint16(raw[:], m.Addr.Port)
			port := binary.BigEndian.Uint16(raw[:])
			addr = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), port)
			return
		}
		// struct sockaddr_in, read through the 16 bytes of an
		// ipv6_mreq, the usual way from Go.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), syscall.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := m.Multiaddr
		addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), binary.BigEndian.Uint16(b[2:4]))
	})
	if err == nil {
		err = serr
	}
	return addr, err
}
