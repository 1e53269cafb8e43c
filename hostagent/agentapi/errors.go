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

import "errors"

// Code classifies an agent error: each maps to one HTTP status and, in the
// gateway, to an MCP tool error a client can act on.
type Code string

// The codes, each with what the caller should do.
const (
	CodeInvalid     Code = "invalid_argument"   // the request is wrong; fix it
	CodeNotFound    Code = "not_found"          // no such handle, job, file or sandbox for this tenant
	CodeTooLarge    Code = "too_large"          // a payload or file over the limit
	CodeExhausted   Code = "resource_exhausted" // a capacity bound; retry later or free capacity
	CodeUnavailable Code = "unavailable"        // the sandbox or node cannot serve now
	CodeInternal    Code = "internal"           // a bug or an unexpected backend failure
	CodeUnauth      Code = "unauthenticated"    // the caller proves no identity the agent accepts
	CodeForbidden   Code = "permission_denied"  // the caller may not act as that tenant
)

// Error is an agent's refusal, or a failure to reach it, with a Code and a
// message that says what to do.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// CodeOf is the code of an agent's error, or "" for any other error (one
// that did not come from an agent).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
