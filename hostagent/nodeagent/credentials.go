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

package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/playground-dev/playground/internal/tokenfile"
)

// certCheckInterval is how often, at most, a TLS handshake looks for a
// renewed certificate on disk.
const certCheckInterval = 10 * time.Second

// tokenSource is the agent API's bearer tokens: the static ones and those
// of a file (a mounted Secret, say), which is re-read so that a rotation
// needs no restart.
type tokenSource struct {
	static []string
	file   *tokenfile.File // nil without one
}

func newTokenSource(static []string, file string) (*tokenSource, error) {
	ts := &tokenSource{}
	for i, t := range static {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if len(t) < tokenfile.MinLen {
			return nil, fmt.Errorf("nodeagent: token %d is shorter than %d bytes", i+1, tokenfile.MinLen)
		}
		ts.static = append(ts.static, t)
	}
	if file != "" {
		f, err := tokenfile.Open(file, tokenfile.MinLen)
		if err != nil {
			return nil, fmt.Errorf("nodeagent: %w", err)
		}
		ts.file = f
	}
	if len(ts.current()) == 0 {
		return nil, errors.New("nodeagent: the agent API would accept no token: give the bearer tokens of the gateway and the manager (a token file); the API is closed by default")
	}
	return ts, nil
}

// current is every accepted token.
func (ts *tokenSource) current() []string {
	toks := slices.Clone(ts.static)
	if ts.file != nil {
		toks = append(toks, ts.file.Tokens()...)
	}
	return toks
}

// watch re-reads the token file every interval and hands a changed set to
// set, until ctx ends. A file that cannot be read or holds no token keeps
// the previous set: a botched rotation must not lock everyone out. With
// static tokens besides, an emptied file leaves those.
func (ts *tokenSource) watch(ctx context.Context, every time.Duration, set func(...string)) error {
	if ts.file == nil {
		<-ctx.Done()
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	wait.UntilWithContext(ctx, func(context.Context) {
		changed, err := ts.file.Reload(len(ts.static) > 0)
		switch {
		case err != nil:
			log.Error(err, "Re-reading the agent API's tokens; keeping the previous ones")
		case changed:
			set(ts.current()...)
			log.Info("Reloaded the agent API's tokens", "file", ts.file.Path(), "tokens", len(ts.file.Tokens()))
		}
	}, every)
	return nil
}

// newTLSConfig serves the key pair of certFile and keyFile, picking up a
// renewed pair (cert-manager, kubelet rotation) without a restart. No
// files, no TLS.
func newTLSConfig(certFile, keyFile string, log logr.Logger) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	kp := &keyPair{certFile: certFile, keyFile: keyFile, log: log}
	if err := kp.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get}, nil
}

type keyPair struct {
	certFile, keyFile string
	log               logr.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	mtimes  [2]time.Time
	checked time.Time
}

func (k *keyPair) modTimes() ([2]time.Time, error) {
	var m [2]time.Time
	for i, p := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(p)
		if err != nil {
			return m, err
		}
		m[i] = fi.ModTime()
	}
	return m, nil
}

func (k *keyPair) load() error {
	m, err := k.modTimes()
	if err != nil {
		return fmt.Errorf("nodeagent: TLS key pair: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("nodeagent: TLS key pair: %w", err)
	}
	k.mu.Lock()
	k.cert, k.mtimes, k.checked = &cert, m, time.Now()
	k.mu.Unlock()
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	due := time.Since(k.checked) >= certCheckInterval
	if due {
		k.checked = time.Now()
	}
	cert, mtimes := k.cert, k.mtimes
	k.mu.Unlock()
	if due {
		if m, err := k.modTimes(); err == nil && m != mtimes {
			if err := k.load(); err != nil {
				k.log.Error(err, "Reloading the API's TLS key pair; serving the previous one")
			} else {
				k.log.Info("Reloaded the API's TLS key pair")
				k.mu.Lock()
				cert = k.cert
				k.mu.Unlock()
			}
		}
	}
	return cert, nil
}
