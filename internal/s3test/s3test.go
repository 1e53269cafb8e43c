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

// Package s3test runs, for tests, a real S3-compatible server (hack/s3server,
// built from the Go module proxy by hack/s3server.sh) as a process on
// loopback, over a file in a temporary directory, with a bucket of its own,
// and in front of it a proxy that counts the requests a test makes and can
// hold them.
package s3test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Env names the S3 server's binary (hack/s3server.sh builds it): the
// Makefile's test target sets it. Tests that need a server skip without it.
const Env = "PLAYGROUND_S3SERVER"

// Server is a running S3 server.
type Server struct {
	// Endpoint is the host:port a client under test uses: the counting
	// proxy's.
	Endpoint string
	// Bucket is the bucket made for the test; AccessKey and SecretKey
	// reach it.
	Bucket, AccessKey, SecretKey string
	// Client reaches the server directly (not counted nor held): for a
	// test to look at or change what is stored.
	Client *minio.Client

	mu       sync.Mutex
	counts   map[string]int // "METHOD key" → requests
	hook     func(*http.Request)
	inFlight map[string]int // key → requests being served
	maxIn    map[string]int // part of a key → most at once (MaxInFlight)
}

// Start runs a server until the test ends, or skips the test when Env is
// unset.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		t.Skipf("%s is unset: run `make test`, or set it to \"$(hack/s3server.sh)\" (the S3 server the tests use)", Env)
	}
	s := &Server{Bucket: "playground-test", AccessKey: "playground-test", SecretKey: "playground-test-secret", counts: map[string]int{}, inFlight: map[string]int{}, maxIn: map[string]int{}}
	cmd := exec.Command(bin, "-listen=127.0.0.1:0", "-db="+filepath.Join(t.TempDir(), "s3.db"), "-buckets="+s.Bucket)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// It says where it serves once it does.
	line, err := bufio.NewReader(io.LimitReader(stdout, 200)).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, stdout); _ = cmd.Wait(); close(exited) }()
	server, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		<-exited
		t.Fatalf("the S3 server did not start (%q, %v): %s", line, err, stderr.String())
	}
	s.Client, err = minio.New(server, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}

	// The proxy keeps the Host header, which the signature covers.
	target := &url.URL{Scheme: "http", Host: server}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a client's cancelled request is not news
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/"+s.Bucket+"/")
		s.mu.Lock()
		s.counts[r.Method+" "+key]++
		hook := s.hook
		s.mu.Unlock()
		if hook != nil {
			hook(r)
		}
		s.mu.Lock()
		s.inFlight[key]++
		for p := range s.maxIn {
			n := 0
			for k, c := range s.inFlight {
				if strings.Contains(k, p) {
					n += c
				}
			}
			s.maxIn[p] = max(s.maxIn[p], n)
		}
		s.mu.Unlock()
		proxy.ServeHTTP(w, r)
		s.mu.Lock()
		s.inFlight[key]--
		if s.inFlight[key] == 0 {
			delete(s.inFlight, key)
		}
		s.mu.Unlock()
	}))
	t.Cleanup(front.Close)
	s.Endpoint = strings.TrimPrefix(front.URL, "http://")
	return s
}

// Requests is how many requests of method for a key beginning with prefix
// came through the proxy.
func (s *Server) Requests(method, prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.counts {
		if strings.HasPrefix(k, method+" "+prefix) {
			n += c
		}
	}
	return n
}

// WatchInFlight starts counting the most requests for keys that contain
// part that the proxy serves at once; MaxInFlight says it.
func (s *Server) WatchInFlight(part string) {
	s.mu.Lock()
	s.maxIn[part] = 0
	s.mu.Unlock()
}

// MaxInFlight is the most requests for keys that contain part (given to
// WatchInFlight before) that the proxy has served at once.
func (s *Server) MaxInFlight(part string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn[part]
}

// OnRequest calls hook with each request through the proxy before it is
// served (nil for none): it may hold it.
func (s *Server) OnRequest(hook func(*http.Request)) {
	s.mu.Lock()
	s.hook = hook
	s.mu.Unlock()
}

// Objects is every object under prefix, by key.
func (s *Server) Objects(t testing.TB, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	for o := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out[o.Key] = s.Get(t, o.Key)
	}
	return out
}

// Get is object key's contents.
func (s *Server) Get(t testing.TB, key string) []byte {
	t.Helper()
	o, err := s.Client.GetObject(context.Background(), s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(o); err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return b.Bytes()
}

// Put writes object key.
func (s *Server) Put(t testing.TB, key string, data []byte) {
	t.Helper()
	if _, err := s.Client.PutObject(context.Background(), s.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}
