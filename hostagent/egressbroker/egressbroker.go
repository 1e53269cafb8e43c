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

// Package egressbroker adds credentials to a sandbox's HTTPS requests at
// the node, so that the credential never exists in the sandbox. A
// sandbox's connections to a brokered host arrive here (redirected by its
// server-name gate); the broker ends their TLS with a certificate for the
// host from a CA of the sandbox's own (which the sandbox trusts, and no
// other), checks that each request's Host is the name the connection
// named, sets the credential's header, and forwards the request over TLS
// verified against the node's roots to the address the sandbox's resolver
// answered for the host. Every other host stays end-to-end TLS.
package egressbroker

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/playground-dev/playground/internal/atomicfile"
)

// Credential is a header the broker sets on requests to Host.
type Credential struct {
	// Host is the name requests go to (exact, lower case).
	Host string
	// Header is the header's name (Authorization, say); Value its value,
	// which replaces whatever the sandbox sent under that name.
	Header string
	Value  string `json:"-"`
}

// Request is one brokered request, for the record: never the header's
// value.
type Request struct {
	Host   string
	Dst    netip.AddrPort
	Method string
	Path   string
	// Status is the upstream's answer, or the broker's own refusal.
	Status int
	// Refused says why the broker answered itself ("" when forwarded).
	Refused string
	// BytesOut and BytesIn are the request's and the response's bodies.
	BytesOut, BytesIn int64
}

// Options configure a Broker.
type Options struct {
	// CAFile keeps the sandbox's CA (certificate and key, PEM); made
	// when missing, so that the sandbox's trust in it survives the
	// agent's restarts.
	CAFile string
	// Name is in the CA's subject, for whoever inspects the trust store.
	Name string
	// Roots verify the upstream servers (nil: the node's).
	Roots *x509.CertPool
	// Denied says whether an address must never be dialled.
	Denied func(netip.Addr) bool
	// Record receives each request.
	Record func(Request)
	// MaxHeaderBytes bounds a request's header (default 64 KiB).
	MaxHeaderBytes int
}

// Broker is the credential broker of one sandbox. It is safe for
// concurrent use.
type Broker struct {
	opts   Options
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	ln     *connListener
	srv    *http.Server
	proxy  *httputil.ReverseProxy
	upTr   *http.Transport
	mu     sync.Mutex
	creds  map[string]Credential
	leaves map[string]*tls.Certificate
}

// New loads or makes the CA and starts serving the connections handed to
// Serve.
func New(opts Options) (*Broker, error) {
	if opts.Denied == nil {
		return nil, errors.New("egressbroker: Denied is required")
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = 64 << 10
	}
	b := &Broker{opts: opts, creds: map[string]Credential{}, leaves: map[string]*tls.Certificate{}}
	if err := b.loadCA(); err != nil {
		return nil, err
	}
	b.upTr = &http.Transport{
		DialContext:           b.dialUpstream,
		TLSClientConfig:       &tls.Config{RootCAs: opts.Roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	b.proxy = &httputil.ReverseProxy{
		Rewrite:   b.rewrite,
		Transport: b.upTr,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if f, ok := r.Context().Value(failureKey{}).(*string); ok {
				*f = "upstream: " + err.Error()
			}
			http.Error(w, "playground egress broker: "+connOf(r.Context()).name+" did not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
	b.ln = &connListener{conns: make(chan net.Conn), done: make(chan struct{})}
	b.srv = &http.Server{
		Handler:           b,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go func() { _ = b.srv.Serve(b.ln) }()
	return b, nil
}

// CAPEM is the certificate the sandbox must trust.
func (b *Broker) CAPEM() []byte { return b.caPEM }

// Set replaces the credentials.
func (b *Broker) Set(creds []Credential) {
	m := make(map[string]Credential, len(creds))
	for _, c := range creds {
		m[strings.ToLower(c.Host)] = c
	}
	b.mu.Lock()
	b.creds = m
	b.mu.Unlock()
}

// Close stops the broker and ends its connections.
func (b *Broker) Close() error {
	err := b.srv.Close()
	b.upTr.CloseIdleConnections()
	return err
}

// Serve ends the TLS of c, a sandbox's connection to dst naming name whose
// ClientHello the caller read already (hello), and serves its requests
// until it ends.
func (b *Broker) Serve(c net.Conn, hello []byte, dst netip.AddrPort, name string) {
	tc := tls.Server(&replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), c)}, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return b.leaf(name)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		b.record(Request{Host: name, Dst: dst, Refused: "TLS handshake with the sandbox: " + err.Error()})
		return
	}
	bc := &brokeredConn{Conn: tc, dst: dst, name: name, closed: make(chan struct{})}
	select {
	case b.ln.conns <- bc:
	case <-b.ln.done:
		return
	}
	<-bc.closed
}

// ServeHTTP checks one request and forwards it with the credential.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := connOf(r.Context())
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	refuse := func(status int, why string) {
		b.record(Request{Host: c.name, Dst: c.dst, Method: r.Method, Path: r.URL.Path, Status: status, Refused: why})
		http.Error(w, "playground egress broker: "+why, status)
	}
	if host != c.name {
		refuse(http.StatusMisdirectedRequest, fmt.Sprintf("the request's Host %q is not the server name %q its connection named", r.Host, c.name))
		return
	}
	if _, ok := b.credential(c.name); !ok {
		refuse(http.StatusServiceUnavailable, fmt.Sprintf("the credential for %s has not reached this node yet (the manager delivers it from the Tenant's Secret): try again shortly", c.name))
		return
	}
	cw := &countingWriter{ResponseWriter: w}
	in := &countingReader{r: r.Body}
	var failure string
	r = r.WithContext(context.WithValue(r.Context(), failureKey{}, &failure))
	r.Body = in
	b.proxy.ServeHTTP(cw, r)
	b.record(Request{Host: c.name, Dst: c.dst, Method: r.Method, Path: r.URL.Path, Status: cw.status, Refused: failure, BytesOut: in.n, BytesIn: cw.n})
}

func (b *Broker) rewrite(pr *httputil.ProxyRequest) {
	c := connOf(pr.In.Context())
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = net.JoinHostPort(c.name, strconv.Itoa(int(c.dst.Port())))
	pr.Out.Host = pr.In.Host
	if cred, ok := b.credential(c.name); ok {
		pr.Out.Header.Set(cred.Header, cred.Value)
	}
}

// dialUpstream dials the address the connection was made to, which the
// sandbox's resolver answered for its name.
func (b *Broker) dialUpstream(ctx context.Context, _, _ string) (net.Conn, error) {
	c := connOf(ctx)
	if c == nil {
		return nil, errors.New("no brokered connection")
	}
	if b.opts.Denied(c.dst.Addr()) {
		return nil, fmt.Errorf("%s is an address egress never opens", c.dst.Addr())
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	return d.DialContext(ctx, "tcp", c.dst.String())
}

func (b *Broker) credential(host string) (Credential, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.creds[host]
	return c, ok
}

// Brokers says whether the broker holds a credential for host.
func (b *Broker) Brokers(host string) bool {
	_, ok := b.credential(host)
	return ok
}

func (b *Broker) record(r Request) {
	if b.opts.Record != nil {
		b.opts.Record(r)
	}
}

// leafLifetime is how long a minted certificate lives; it is minted again
// an hour before it ends.
const leafLifetime = 24 * time.Hour

// maxLeaves bounds the certificates kept, one per brokered name.
const maxLeaves = 256

// leaf is the certificate for name, signed by the sandbox's CA.
func (b *Broker) leaf(name string) (*tls.Certificate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.leaves[name]; ok && time.Until(l.Leaf.NotAfter) > time.Hour {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.ca, &key.PublicKey, b.caKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if len(b.leaves) >= maxLeaves {
		clear(b.leaves)
	}
	l := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
	b.leaves[name] = l
	return l, nil
}

// caLifetime is the sandbox CA's; the sandbox trusts it for as long.
const caLifetime = 10 * 365 * 24 * time.Hour

// loadCA reads the CA from opts.CAFile, or makes and keeps one.
func (b *Broker) loadCA() error {
	data, err := os.ReadFile(b.opts.CAFile)
	if err == nil {
		if err := b.parseCA(data); err != nil {
			return fmt.Errorf("egressbroker: %s: %w", b.opts.CAFile, err)
		}
		return nil
	}
	if !os.IsNotExist(err) {
		return fmt.Errorf("egressbroker: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Playground egress broker " + b.opts.Name},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	data = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := atomicfile.Write(b.opts.CAFile, data, 0o600); err != nil {
		return fmt.Errorf("egressbroker: keeping the CA: %w", err)
	}
	return b.parseCA(data)
}

func (b *Broker) parseCA(data []byte) error {
	var certDER, keyDER []byte
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			certDER = blk.Bytes
		case "EC PRIVATE KEY":
			keyDER = blk.Bytes
		}
	}
	if certDER == nil || keyDER == nil {
		return errors.New("no CA certificate and key")
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return err
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return err
	}
	b.ca, b.caKey = cert, key
	b.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	return nil
}

// brokeredConn is a sandbox's connection, its TLS ended, with where it
// was going and the name it named.
type brokeredConn struct {
	net.Conn
	dst    netip.AddrPort
	name   string
	once   sync.Once
	closed chan struct{}
}

func (c *brokeredConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

type connKey struct{}

// failureKey holds, in a request's context, why forwarding it failed.
type failureKey struct{}

func connOf(ctx context.Context) *brokeredConn {
	c, _ := ctx.Value(connKey{}).(*brokeredConn)
	if c == nil {
		return &brokeredConn{}
	}
	return c
}

// connListener hands Serve's connections to the HTTP server.
type connListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{} }

// replayConn reads what was read of a connection already, then the rest.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *countingWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	return n, err
}

func (r *countingReader) Close() error { return r.r.Close() }
