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

// Package boundedlog is a log file bounded on disk: past its size it
// rotates to one predecessor, so that whatever is written to it (a guest's
// console, a component's logs) holds at most twice the bound.
package boundedlog

import (
	"bytes"
	"os"
	"sync"
)

// DefaultBytes is the bound of a log opened with none: the file holds at
// most this many bytes, and its one predecessor (name.1) as many.
const DefaultBytes = 1 << 20

// Log appends to a log file of at most max bytes. When the next
// write would pass the bound, the file becomes path.1 (replacing the one
// before) and a new one starts: at most 2×max bytes on disk, whatever is
// written, with the newest in path.
type Log struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	n    int64 // bytes in f
	err  error // the first failure to write or rotate; later writes are dropped
}

// Open opens path to append to, with what it holds counted; limit <= 0 is
// DefaultBytes.
func Open(path string, limit int64) (*Log, error) {
	if limit <= 0 {
		limit = DefaultBytes
	}
	l := &Log{path: path, max: limit}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.n = f, st.Size()
	return nil
}

// rotate moves the full file to path.1 and starts an empty one.
func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	return l.open()
}

// Write appends p, rotating first as often as the bound needs: at a line's
// end when p has one before the bound, so that most lines stay whole. It
// never fails: a log that cannot be written drops what it is given, so
// that its writer is never held up.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 && l.err == nil {
		room := l.max - l.n
		if room <= 0 || (int64(len(p)) > room && l.n > 0 && bytes.IndexByte(p[:room], '\n') < 0) {
			// Full, or the next line would not fit: start a new file
			// rather than cut it (unless it is longer than a file).
			l.err = l.rotate()
			continue
		}
		k := int64(len(p))
		if k > room {
			k = room
			if i := bytes.LastIndexByte(p[:room], '\n'); i >= 0 {
				k = int64(i + 1)
			}
		}
		w, err := l.f.Write(p[:k])
		l.n += int64(w)
		p = p[w:]
		if err != nil {
			l.err = err
		}
	}
	return n, nil
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if l.err == nil {
		l.err = os.ErrClosed
	}
	return err
}
