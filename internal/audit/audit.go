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

// Package audit is the audit trail of tool calls: one structured JSON
// record per call, each carrying the hash of the one before it in its
// chain, so that a record removed, altered or moved is detected (Verify).
// A Trail hands every record to its sinks (a file with rotation, standard
// output, a webhook), each behind a bounded queue of its own: a slow or
// dead sink never holds a call up; what a full queue drops is counted,
// and the next record the sink takes says how many it missed.
package audit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Level is how much of a call a record keeps.
type Level string

// The levels, in the spirit of the Kubernetes audit policy's.
const (
	// LevelNone records nothing.
	LevelNone Level = "None"
	// LevelMetadata records who called what, when, where and how it
	// ended: no command, path or size.
	LevelMetadata Level = "Metadata"
	// LevelRequest adds the command, path and job the call named (never
	// what a write carries, nor a job's input).
	LevelRequest Level = "Request"
	// LevelRequestResult adds the sizes of the request and the result,
	// and a command's exit code.
	LevelRequestResult Level = "RequestResult"
)

// ParseLevel reads a level's name.
func ParseLevel(s string) (Level, error) {
	for _, l := range []Level{LevelNone, LevelMetadata, LevelRequest, LevelRequestResult} {
		if strings.EqualFold(s, string(l)) {
			return l, nil
		}
	}
	return "", fmt.Errorf("audit level %q is none of None, Metadata, Request, RequestResult", s)
}

// MaxCommand bounds the command a record keeps; a longer one is cut and
// says so.
const MaxCommand = 4096

// Record is one tool call.
type Record struct {
	// Chain names the trail the record belongs to (one per process that
	// writes records), Seq its place there from 1.
	Chain string    `json:"chain"`
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	// Component is who recorded it: gateway or agent.
	Component string `json:"component"`
	Tenant    string `json:"tenant,omitempty"`
	// Identity is who authenticated: a tenant's credential at the
	// gateway, a Kubernetes user at an agent.
	Identity string `json:"identity,omitempty"`
	// Session is the MCP session (none with a stateless gateway), Handle
	// the sandbox session the call used (open_session's handle).
	Session string `json:"session,omitempty"`
	Handle  string `json:"handle,omitempty"`
	Tool    string `json:"tool"`
	// Command, Path and Job are what the call named (LevelRequest).
	Command string `json:"command,omitempty"`
	Path    string `json:"path,omitempty"`
	Job     string `json:"job,omitempty"`
	// Outcome is ok or error; Code the error's code.
	Outcome    string  `json:"outcome"`
	Code       string  `json:"code,omitempty"`
	DurationMS float64 `json:"durationMs"`
	// BytesIn and BytesOut are the sizes of the call's arguments and of
	// its result; ExitCode a command's (LevelRequestResult).
	BytesIn  int64  `json:"bytesIn,omitempty"`
	BytesOut int64  `json:"bytesOut,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Node     string `json:"node,omitempty"`
	Sandbox  string `json:"sandbox,omitempty"`
	// ImageDigest is the digest of the image the sandbox runs as its
	// system (its status.image.digest), for a sandbox on an image.
	ImageDigest string `json:"imageDigest,omitempty"`
	// Prev is the hash of the record before this one in its chain ("" for
	// the first); Hash this one's, over every field above.
	Prev string `json:"prev"`
	Hash string `json:"hash"`
	// Missed, outside the hash, is how many records of the chain the sink
	// that wrote this one dropped just before it (its queue was full).
	Missed uint64 `json:"missed,omitempty"`
}

// hash is r's hash: SHA-256 over its JSON without Hash and Missed.
func (r Record) hash() string {
	r.Hash, r.Missed = "", 0
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a Record always encodes
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Sink takes records. Put must not block: it queues or drops.
type Sink interface {
	Put(Record)
	// Close delivers what is queued, within a bound of its own, and
	// stops.
	Close() error
}

// Trail numbers, chains and hands out the records of one process.
type Trail struct {
	level     Level
	component string
	sinks     []Sink

	mu    sync.Mutex
	chain string
	seq   uint64
	prev  string
}

// New returns a trail at level, for component, writing to sinks.
func New(level Level, component string, sinks ...Sink) *Trail {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Trail{level: level, component: component, sinks: sinks, chain: hex.EncodeToString(id[:])}
}

// Level is what the trail keeps of a call; a nil trail keeps nothing.
func (t *Trail) Level() Level {
	if t == nil || len(t.sinks) == 0 {
		return LevelNone
	}
	return t.level
}

// Record adds r to the chain and hands it to every sink. It keeps only
// what the level allows of r.
func (t *Trail) Record(r Record) {
	if t.Level() == LevelNone {
		return
	}
	switch t.level {
	case LevelMetadata:
		r.Command, r.Path, r.Job = "", "", ""
		fallthrough
	case LevelRequest:
		r.BytesIn, r.BytesOut, r.ExitCode = 0, 0, nil
	}
	if len(r.Command) > MaxCommand {
		r.Command = r.Command[:MaxCommand] + "…(cut)"
	}
	r.Component = t.component
	t.mu.Lock()
	t.seq++
	r.Chain, r.Seq, r.Prev = t.chain, t.seq, t.prev
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	r.Hash = r.hash()
	t.prev = r.Hash
	// Handed out under the lock, so that every sink gets the chain in
	// order; Put only queues.
	for _, s := range t.sinks {
		s.Put(r)
	}
	t.mu.Unlock()
}

// Close closes the sinks.
func (t *Trail) Close() error {
	if t == nil {
		return nil
	}
	var first error
	for _, s := range t.sinks {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
