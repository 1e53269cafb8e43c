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

// Package s3test runs, for tests, a real S3-compatible server: SeaweedFS
// (`weed mini`, built from the Go module proxy by hack/seaweedfs.sh), on
// loopback ports, over a temporary directory, with a bucket and
// credentials of its own, in front of which a proxy counts the requests a
// test makes and can hold them.
package s3test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Env names the SeaweedFS binary (`weed`): the Makefile's test target sets
// it to "$(hack/seaweedfs.sh)". Tests that need a server skip without it.
const Env = "PLAYGROUND_SEAWEEDFS"

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
	inFlight int
	maxIn    int
}

// Start runs a server until the test ends, or skips the test when Env is
// unset.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		t.Skipf("%s is unset: run `make test`, or set it to \"$(hack/seaweedfs.sh)\" (SeaweedFS, the S3 server the tests use)", Env)
	}
	dir := t.TempDir()
	ports := freePorts(t, 8)
	s := &Server{Bucket: "playground-test", AccessKey: "playground-test", SecretKey: "playground-test-secret", counts: map[string]int{}}
	logPath := filepath.Join(dir, "weed.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mini",
		"-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+ports[0], "-master.port.grpc="+ports[1],
		"-volume.port="+ports[2], "-volume.port.grpc="+ports[3],
		"-filer.port="+ports[4], "-filer.port.grpc="+ports[5],
		"-s3.port="+ports[6], "-s3.port.grpc="+ports[7],
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-webdav=false", "-admin.ui=false",
		"-master.telemetry=false",
		"-bucket="+s.Bucket,
	)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	server := "127.0.0.1:" + ports[6]
	s.Client, err = minio.New(server, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	// Ready when the bucket it was told to make is there.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := s.Client.BucketExists(ctx, s.Bucket)
		cancel()
		if ok {
			break
		}
		select {
		case <-exited:
			t.Fatalf("SeaweedFS exited before it served (%v); its log:\n%s", err, tail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("SeaweedFS did not serve bucket %s within 2 minutes (%v); its log:\n%s", s.Bucket, err, tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The proxy keeps the Host header, which the signature covers.
	target := &url.URL{Scheme: "http", Host: server}
	proxy := httputil.NewSingleHostReverseProxy(target)
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
		s.inFlight++
		s.maxIn = max(s.maxIn, s.inFlight)
		s.mu.Unlock()
		proxy.ServeHTTP(w, r)
		s.mu.Lock()
		s.inFlight--
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

// MaxInFlight is the most requests the proxy has served at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn
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

// freePorts is n loopback ports free a moment ago, held together so that
// they differ.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var ls []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

func tail(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
