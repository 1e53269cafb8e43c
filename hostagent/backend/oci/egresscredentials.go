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
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressbroker"
	"github.com/playground-dev/playground/hostagent/egressdns"
)

// Brokered credentials: the agent is given, for a sandbox, the values of
// the headers its brokered rules name (SetEgressCredentials), and keeps
// them in this process's memory only. A sandbox with egress by name has a
// broker (package egressbroker) with a CA of its own, kept in its
// directory on the node and added to the trust bundle the sandbox sees at
// /etc/ssl/certs/ca-certificates.crt, so that rules brokered while it runs
// need no restart. The broker ends TLS only for the hosts of brokered
// rules; every other connection is spliced or routed untouched.

// Bounds of one sandbox's credentials.
const (
	maxCredentials     = 64
	maxCredentialValue = 8 << 10
	// maxCredentialSandboxes bounds the sandboxes credentials are kept
	// for (a destroyed one's are dropped).
	maxCredentialSandboxes = 4096
)

// trustBundle is the file the sandbox's CA bundle is mounted from, and
// systemBundle the node's bundle it extends.
const (
	trustBundle  = "egress-trust.pem"
	systemBundle = "ssl/certs/ca-certificates.crt"
)

var egressCredentials = struct {
	sync.Mutex
	by map[string][]backend.EgressCredential
}{by: map[string][]backend.EgressCredential{}}

// SetEgressCredentials implements backend.EgressBroker.
func (b *Backend) SetEgressCredentials(id string, creds []backend.EgressCredential) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	if len(creds) > maxCredentials {
		return fmt.Errorf("oci: %d credentials for sandbox %s, over the limit of %d", len(creds), id, maxCredentials)
	}
	for _, c := range creds {
		if !validHostPattern(c.Host) || strings.HasPrefix(c.Host, "*.") {
			return fmt.Errorf("oci: credential host %q is not a lower-case DNS name", c.Host)
		}
		if !httpguts.ValidHeaderFieldName(c.Header) || http.CanonicalHeaderKey(c.Header) == "Host" {
			return fmt.Errorf("oci: credential header %q for %s is not a header a request may carry", c.Header, c.Host)
		}
		if len(c.Value) > maxCredentialValue || !httpguts.ValidHeaderFieldValue(c.Value) {
			// The value is never in a message.
			return fmt.Errorf("oci: the credential for %s is not a header value of at most %d bytes", c.Host, maxCredentialValue)
		}
	}
	egressCredentials.Lock()
	_, known := egressCredentials.by[id]
	switch {
	case len(creds) == 0:
		delete(egressCredentials.by, id)
	case !known && len(egressCredentials.by) >= maxCredentialSandboxes:
		egressCredentials.Unlock()
		return fmt.Errorf("oci: credentials are kept for %d sandboxes already, the most this node keeps", maxCredentialSandboxes)
	default:
		egressCredentials.by[id] = slices.Clone(creds)
	}
	egressCredentials.Unlock()

	sb, err := b.load(id)
	if err != nil {
		return nil //nolint:nilerr // not provisioned yet: its broker takes them when it starts
	}
	resolvers.Lock()
	ne := resolvers.at[b.egressNet(sb).node]
	resolvers.Unlock()
	if ne == nil || ne.backend != b {
		return nil
	}
	ne.mu.Lock()
	br := ne.broker
	ne.mu.Unlock()
	if br != nil {
		br.Set(credentialsFor(sb))
	}
	return nil
}

// forgetCredentials drops a destroyed sandbox's credentials.
func forgetCredentials(id string) {
	egressCredentials.Lock()
	delete(egressCredentials.by, id)
	egressCredentials.Unlock()
}

// credentialsFor are the credentials given for sb that its brokered rules
// name.
func credentialsFor(sb *sandbox) []egressbroker.Credential {
	hosts := brokeredHosts(sb)
	egressCredentials.Lock()
	defer egressCredentials.Unlock()
	var out []egressbroker.Credential
	for _, c := range egressCredentials.by[sb.spec.ID] {
		if hosts[c.Host] {
			out = append(out, egressbroker.Credential{Host: c.Host, Header: c.Header, Value: c.Value})
		}
	}
	return out
}

// startBroker starts sb's broker and writes the trust bundle that names
// its CA.
func (b *Backend) startBroker(sb *sandbox) (*egressbroker.Broker, error) {
	br, err := egressbroker.New(egressbroker.Options{
		CAFile: filepath.Join(sb.dir, "egress-ca.pem"),
		Name:   sb.spec.ID,
		Roots:  b.opts.EgressRoots,
		Denied: b.deniedAnswer,
		Record: func(r egressbroker.Request) {
			if b.opts.OnEgressDNS == nil {
				return
			}
			d := egressdns.Decision{Sandbox: sb.spec.ID, Tenant: sb.spec.Tenant, Name: r.Host, Type: egressdns.TypeBrokered,
				Result: egressdns.Allowed, Dst: r.Dst, Method: r.Method, Path: r.Path, Status: r.Status, BytesOut: r.BytesOut, BytesIn: r.BytesIn}
			if r.Refused != "" {
				d.Result, d.Error = egressdns.Denied, r.Refused
			}
			b.opts.OnEgressDNS(d)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("oci: sandbox %s: its credential broker: %w", sb.spec.ID, err)
	}
	bundle, err := os.ReadFile(filepath.Join(b.opts.BaseRoot, "etc", systemBundle))
	if err != nil && !os.IsNotExist(err) {
		_ = br.Close()
		return nil, fmt.Errorf("oci: sandbox %s: the node's CA bundle: %w", sb.spec.ID, err)
	}
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	if err := writeIfChanged(filepath.Join(sb.dir, trustBundle), append(bundle, br.CAPEM()...), 0o644); err != nil {
		_ = br.Close()
		return nil, fmt.Errorf("oci: sandbox %s: its CA bundle: %w", sb.spec.ID, err)
	}
	br.Set(credentialsFor(sb))
	return br, nil
}

// trustMount is the mount of sb's CA bundle over the node's, when sb has
// a broker and sees the node's bundle.
func (b *Backend) trustMount(sb *sandbox) []mount {
	if !hasNamedEgress(sb) || !slices.Contains(b.opts.EtcFiles, "ssl/certs") ||
		!backend.FileExists(filepath.Join(sb.dir, trustBundle)) || !backend.FileExists(filepath.Join(b.opts.BaseRoot, "etc", systemBundle)) {
		return nil
	}
	return []mount{{Destination: filepath.Join("/etc", systemBundle), Type: "bind", Source: filepath.Join(sb.dir, trustBundle),
		Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}}}
}
