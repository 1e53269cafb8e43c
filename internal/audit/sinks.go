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

package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RecordsTotal counts the records each sink wrote and dropped; a
// component registers it with its metrics.
var RecordsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "playground_audit_records_total",
	Help: "Audit records by sink (file, stdout, webhook) and result: written, or dropped (the sink's queue was full or it failed).",
}, []string{"sink", "result"})

// DefaultQueue is how many records a sink holds before it drops.
const DefaultQueue = 4096

// queue is the bounded queue in front of a sink's writer: Put never
// blocks; a full queue drops, and the next record queued carries how
// many were dropped before it.
type queue struct {
	name   string
	ch     chan Record
	write  func([]Record) error
	mu     sync.Mutex
	missed uint64
	closed bool
	done   chan struct{}
	once   sync.Once
}

func newQueue(name string, size int, write func([]Record) error) *queue {
	if size <= 0 {
		size = DefaultQueue
	}
	q := &queue{name: name, ch: make(chan Record, size), write: write, done: make(chan struct{})}
	go q.run()
	return q
}

func (q *queue) Put(r Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	r.Missed = q.missed
	select {
	case q.ch <- r:
		q.missed = 0
	default:
		q.missed++
		RecordsTotal.WithLabelValues(q.name, "dropped").Inc()
	}
}

// run writes what is queued, as many records at once as are waiting.
func (q *queue) run() {
	defer close(q.done)
	for r := range q.ch {
		batch := []Record{r}
	more:
		for len(batch) < 256 {
			select {
			case r, ok := <-q.ch:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		result := "written"
		if err := q.write(batch); err != nil {
			result = "dropped"
		}
		RecordsTotal.WithLabelValues(q.name, result).Add(float64(len(batch)))
	}
}

func (q *queue) Close() error {
	q.once.Do(func() {
		q.mu.Lock()
		q.closed = true
		close(q.ch)
		q.mu.Unlock()
	})
	select {
	case <-q.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("audit: the %s sink did not write its queue within 10 s", q.name)
	}
}

// Writer sinks records as JSON lines to w (standard output, say).
func Writer(name string, w io.Writer, queueSize int) Sink {
	return newQueue(name, queueSize, func(rs []Record) error { return writeLines(w, rs) })
}

func writeLines(w io.Writer, rs []Record) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// FileOptions configure a file sink.
type FileOptions struct {
	Path string
	// MaxBytes rotates the file when it would grow past it (default 100
	// MiB): Path becomes Path.1, Path.1 Path.2, and so on.
	MaxBytes int64
	// MaxBackups is how many rotated files are kept (default 5).
	MaxBackups int
	Queue      int
}

// File sinks records as JSON lines to a file, rotated by size.
func File(opts FileOptions) (Sink, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 100 << 20
	}
	if opts.MaxBackups <= 0 {
		opts.MaxBackups = 5
	}
	f := &rotating{opts: opts}
	if err := f.open(); err != nil {
		return nil, err
	}
	q := newQueue("file", opts.Queue, f.write)
	return &fileSink{queue: q, f: f}, nil
}

type fileSink struct {
	*queue
	f *rotating
}

func (s *fileSink) Close() error {
	err := s.queue.Close()
	return errors.Join(err, s.f.close())
}

type rotating struct {
	opts FileOptions
	file *os.File
	size int64
}

func (f *rotating) open() error {
	if err := os.MkdirAll(filepath.Dir(f.opts.Path), 0o750); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	file, err := os.OpenFile(f.opts.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return fmt.Errorf("audit: %w", err)
	}
	f.file, f.size = file, st.Size()
	return nil
}

func (f *rotating) write(rs []Record) error {
	// A batch is written whole, but into as many files as its size asks.
	var buf bytes.Buffer
	for _, r := range rs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		line = append(line, '\n')
		if f.size+int64(buf.Len()+len(line)) > f.opts.MaxBytes && f.size+int64(buf.Len()) > 0 {
			if err := f.flush(&buf); err != nil {
				return err
			}
			if err := f.rotate(); err != nil {
				return err
			}
		}
		buf.Write(line)
	}
	return f.flush(&buf)
}

func (f *rotating) flush(buf *bytes.Buffer) error {
	n, err := f.file.Write(buf.Bytes())
	f.size += int64(n)
	buf.Reset()
	return err
}

func (f *rotating) rotate() error {
	if err := f.file.Close(); err != nil {
		return err
	}
	for i := f.opts.MaxBackups - 1; i >= 1; i-- {
		_ = os.Rename(f.opts.Path+"."+strconv.Itoa(i), f.opts.Path+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(f.opts.Path, f.opts.Path+".1"); err != nil {
		return err
	}
	return f.open()
}

func (f *rotating) close() error { return f.file.Close() }

// WebhookOptions configure a webhook sink.
type WebhookOptions struct {
	// URL receives POSTs of JSON lines (application/x-ndjson), up to 256
	// records each.
	URL string
	// Client sends them (default: a client with a 5 s timeout).
	Client *http.Client
	Queue  int
}

// Webhook sinks records to an HTTP endpoint. A batch the endpoint does
// not take (an error, a status other than 2xx, no answer within the
// client's timeout) is dropped and counted; the chain of the records
// after it says where (Verify: the records were removed).
func Webhook(opts WebhookOptions) Sink {
	c := opts.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	return newQueue("webhook", opts.Queue, func(rs []Record) error {
		var buf bytes.Buffer
		if err := writeLines(&buf, rs); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout+time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, opts.URL, &buf)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("audit webhook answered %s", resp.Status)
		}
		return nil
	})
}
