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

package agentapi

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// The IDs an agent issues: a prefix and 128 random bits in lower-case
// base32 without padding. Unguessable, so holding one proves it was handed
// out; and of one fixed shape, so that every end refuses anything else
// (".", "..", a path, bytes to echo) before it is looked up, logged or
// quoted.
const (
	// HandlePrefix starts a session handle.
	HandlePrefix = "h_"
	// JobPrefix starts a job ID.
	JobPrefix = "job_"
	// idRandomChars is the length of the random part: 128 bits in base32.
	idRandomChars = 26
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewHandle returns a fresh session handle.
func NewHandle() string { return newID(HandlePrefix) }

// NewJobID returns a fresh job ID.
func NewJobID() string { return newID(JobPrefix) }

func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail; it crashes the program instead
	return prefix + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// ValidHandle reports whether s has the shape of a handle an agent issues.
func ValidHandle(s string) bool { return validID(HandlePrefix, s) }

// ValidJobID reports whether s has the shape of a job ID an agent issues.
func ValidJobID(s string) bool { return validID(JobPrefix, s) }

func validID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != idRandomChars {
		return false
	}
	for i := range len(rest) {
		c := rest[i]
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	// 26 base32 characters hold 130 bits: the last one carries 3 bits of
	// the 128 and two zero bits, so it is one of a, e, i, m, q, u, y, 4.
	return strings.IndexByte("aeimquy4", rest[idRandomChars-1]) >= 0
}

// The agent's one answer (CodeNotFound) for a handle or job ID that is
// unknown, expired, recycled, another tenant's, or not of the shape it
// issues: the same text for all, quoting nothing of the caller's, so that it
// tells a caller nothing about what is not its own. A client refuses an ID
// of the wrong shape with it too, without sending it: "." or ".." in a URL
// path would not reach the agent's handler at all.
const (
	HandleNotFound = "session handle not found: it is not one open_session gave, or it was closed, expired after going unused, or is not yours; open a new one with open_session"
	JobNotFound    = "job not found: it is not one job_exec gave, or it never existed for this tenant, or it ended and was recycled after its final page was acknowledged or its result went unread too long; start it again with job_exec if you still need it"
)

func errHandleNotFound() error { return &Error{Code: CodeNotFound, Message: HandleNotFound} }
func errJobNotFound() error    { return &Error{Code: CodeNotFound, Message: JobNotFound} }

// An internal error (CodeInternal) reaches the caller as an ID and a
// generic text: its detail (a backend's error, which may name the node's
// paths) goes only to the log of whoever answered, under the same ID.
const internalErrorPrefix = "internal error "

// NewErrorID returns a fresh ID for an internal error: 80 random bits, so
// that one log line matches it.
func NewErrorID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// InternalErrorMessage is the message of an internal error logged under id.
func InternalErrorMessage(id string) string {
	return internalErrorPrefix + id + ": the call failed inside Playground; retry, and if it persists give the operator this error's ID"
}

// InternalErrorID returns the ID of an internal error's message, if it
// carries one in the shape NewErrorID makes.
func InternalErrorID(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, internalErrorPrefix)
	if !ok || len(rest) < 17 || rest[16] != ':' {
		return "", false
	}
	id := rest[:16]
	if strings.Trim(id, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		return "", false
	}
	return id, true
}
