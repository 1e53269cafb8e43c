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

// Package registrytransport is the transport of every request this module
// makes to an image registry (the manager resolving a tag, a node's image
// store pulling): HTTPS only, but for the registries it is told to reach in
// cleartext. go-containerregistry falls back to plain HTTP for a registry
// on a loopback or private address, which would send a pull credential
// across the network in the clear; this transport refuses that request.
package registrytransport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
)

// Options configure a transport.
type Options struct {
	// Base is the transport requests go through; nil: a clone of Go's
	// default, trusting RootCAs.
	Base http.RoundTripper
	// RootCAs are the CAs a registry's certificate is checked against;
	// nil: the system's.
	RootCAs *x509.CertPool
	// PlainHTTP are the registries reached over cleartext HTTP, each
	// host:port, or a host for any of its ports.
	PlainHTTP []string
	// Flag is the setting that lists PlainHTTP, named in the refusal so
	// that it says what to change.
	Flag string
}

// New returns the transport o describes.
func New(o Options) http.RoundTripper {
	base := o.Base
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
		base = t
	}
	return &httpsOnly{inner: base, plain: o.PlainHTTP, flag: o.Flag}
}

// httpsOnly refuses a request in cleartext to a registry it was not told
// to reach so.
type httpsOnly struct {
	inner http.RoundTripper
	plain []string
	flag  string
}

func (h *httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !h.allows(req.URL.Host) {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("registry %s is reached over HTTPS only: list it in %s to reach it over cleartext HTTP", req.URL.Host, h.flag)
	}
	return h.inner.RoundTrip(req)
}

func (h *httpsOnly) allows(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return slices.Contains(h.plain, hostport) || slices.Contains(h.plain, host)
}
