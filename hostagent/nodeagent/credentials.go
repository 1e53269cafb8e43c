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
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/playground-dev/playground/internal/tokenfile"
)

// tokenSource is the agent API's bearer tokens: the static ones and those
// of a file (a mounted Secret, say), which is re-read so that a rotation
// needs no restart.
type tokenSource struct {
	static []string
	file   *tokenfile.File // nil without one
}

// newTokenSource reads the shared tokens; without any it fails unless
// gateways are trusted by identity (optional).
func newTokenSource(static []string, file string, optional bool) (*tokenSource, error) {
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
	if len(ts.current()) == 0 && !optional {
		return nil, errors.New("nodeagent: the agent API would accept no gateway: trust the gateway's ServiceAccount (--trusted-gateway), or give a shared token (a token file, for playground-dev)")
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
// renewed pair (cert-manager, kubelet rotation) without a restart through
// controller-runtime's certwatcher: on the files' change events, and every
// 10 s besides. A renewal that cannot be loaded keeps the previous pair. No
// files, no TLS. The watch runs until stop, which waits for it.
func newTLSConfig(ctx context.Context, certFile, keyFile string, log logr.Logger) (_ *tls.Config, stop func(), _ error) {
	if certFile == "" {
		return nil, func() {}, nil
	}
	w, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeagent: TLS key pair: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Start(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Watching the API's TLS key pair; a renewed pair is not served until a restart")
		}
	}()
	stop = func() {
		cancel()
		<-done
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate}, stop, nil
}
