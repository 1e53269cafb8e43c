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

// Package tokenfile reads the agent-token file that both ends of the agent
// API mount from one Secret: one bearer token a line. The agent accepts
// every token of its file; the gateway presents the first of its own, so
// that a rotation writes the new token above the old one and agents accept
// both until the old one goes.
//
// The format: each line is a token with the white space around it trimmed;
// blank lines are skipped. There are no comments: the file is a Secret's
// value, and a line starting with '#' is a token like any other. A file is
// at most MaxSize bytes.
package tokenfile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

const (
	// MaxSize bounds a token file: a few tokens, not a database.
	MaxSize = 64 << 10
	// MinLen is the shortest token the side that accepts tokens takes: a
	// shorter one could be guessed.
	MinLen = 16
)

// ErrNoToken is returned by Reload for a file that holds no token.
var ErrNoToken = errors.New("holds no token")

// Parse returns the tokens of a file's content, refusing a token shorter
// than minLen (0: any length) by its line number; the token itself is never
// part of an error.
func Parse(data []byte, minLen int) ([]string, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("over %d bytes", MaxSize)
	}
	var toks []string
	for i, line := range bytes.Split(data, []byte("\n")) {
		t := strings.TrimSpace(string(line))
		if t == "" {
			continue
		}
		if len(t) < minLen {
			return nil, fmt.Errorf("the token on line %d is shorter than %d bytes", i+1, minLen)
		}
		toks = append(toks, t)
	}
	return toks, nil
}

// Read reads and parses the token file at path (see Parse).
func Read(path string, minLen int) ([]string, error) {
	toks, _, err := read(path, minLen)
	return toks, err
}

func read(path string, minLen int) ([]string, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		return nil, sum, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, sum, fmt.Errorf("token file %s: %w", path, err)
	}
	toks, err := Parse(data, minLen)
	if err != nil {
		return nil, sum, fmt.Errorf("token file %s: %w", path, err)
	}
	return toks, sha256.Sum256(data), nil
}

// File is a token file kept current by Reload, so that a rotated Secret
// takes effect without a restart. It is safe for concurrent use.
type File struct {
	path   string
	minLen int

	mu     sync.Mutex
	tokens []string
	sum    [sha256.Size]byte // of the content last taken, to notice changes
}

// Open reads the token file at path, refusing tokens shorter than minLen
// (0: any length). A file that holds no token is not an error here:
// whether none will do is the caller's call (Tokens is empty).
func Open(path string, minLen int) (*File, error) {
	toks, sum, err := read(path, minLen)
	if err != nil {
		return nil, err
	}
	return &File{path: path, minLen: minLen, tokens: toks, sum: sum}, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Tokens returns the tokens last taken from the file.
func (f *File) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokens)
}

// Reload re-reads the file and reports whether its tokens changed. A file
// that cannot be read or parsed keeps the previous tokens, and so does one
// that holds no token (ErrNoToken) unless allowEmpty: a rotation gone wrong
// must not lock everyone out.
func (f *File) Reload(allowEmpty bool) (changed bool, err error) {
	toks, sum, err := read(f.path, f.minLen)
	if err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if sum == f.sum {
		return false, nil
	}
	if len(toks) == 0 && !allowEmpty {
		return false, fmt.Errorf("token file %s %w", f.path, ErrNoToken)
	}
	f.tokens, f.sum = toks, sum
	return true, nil
}
