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

// Command s3server serves the S3 API from a file on disk, on loopback, for
// the snapshot store's tests (internal/s3test): gofakes3's
// implementation of the protocol (path-style buckets, objects, listings
// v1 and v2, multipart uploads, conditional and ranged requests) over its
// bbolt backend. It does not check request signatures: it is a test
// server, never one for data. It prints "listening on HOST:PORT" once it
// serves, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	bolt "go.etcd.io/bbolt"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (port 0: any free port)")
	db := flag.String("db", "", "the file that holds the buckets (required)")
	buckets := flag.String("buckets", "", "comma-separated buckets to make if missing")
	flag.Parse()
	if err := run(*listen, *db, *buckets); err != nil {
		log.Fatalf("s3server: %v", err)
	}
}

func run(listen, db, buckets string) error {
	if db == "" {
		return errors.New("-db is required: the file that holds the buckets")
	}
	file, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("opening %s: %w", db, err)
	}
	defer file.Close()
	backend := s3bolt.New(file)
	for _, b := range strings.Split(buckets, ",") {
		if b == "" {
			continue
		}
		if err := backend.CreateBucket(b); err != nil && !gofakes3.IsAlreadyExists(err) {
			return fmt.Errorf("making bucket %s: %w", b, err)
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server(),
		ReadHeaderTimeout: 30 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("listening on %s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	<-served
	return nil
}
