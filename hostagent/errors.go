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

package hostagent

import (
	"errors"
	"fmt"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/jobs"
)

func errorf(code agentapi.Code, format string, args ...any) *agentapi.Error {
	return &agentapi.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf classifies any error the agent returns.
func CodeOf(err error) agentapi.Code {
	var e *agentapi.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, jobs.ErrNotFound):
		return agentapi.CodeNotFound
	case errors.Is(err, jobs.ErrBadCursor), errors.Is(err, jobs.ErrInputRefused), errors.Is(err, jobs.ErrEnded), errors.Is(err, jobs.ErrKeyConflict):
		return agentapi.CodeInvalid
	case errors.Is(err, jobs.ErrCapacity):
		return agentapi.CodeExhausted
	case errors.Is(err, jobs.ErrAdmissionHalted), errors.Is(err, jobs.ErrClosed), errors.Is(err, jobs.ErrUnreachable), errors.Is(err, jobs.ErrSuspended):
		return agentapi.CodeUnavailable
	}
	return agentapi.CodeInternal
}

// HandleNotFound is the one answer for unknown, expired, malformed and
// other tenants' handles (agentapi.HandleNotFound), so that a caller learns
// nothing about handles not its own.
func HandleNotFound() *agentapi.Error {
	return &agentapi.Error{Code: agentapi.CodeNotFound, Message: agentapi.HandleNotFound}
}
