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

package backend

import (
	"context"
	"fmt"

	"github.com/playground-dev/playground/hostagent/filecall"
)

// FileServer is the behaviour, in Capabilities.FileServer, of a backend
// that serves the agent's file calls in its sandboxes: a read, a ranged
// read, a digest, a write that replaces the file atomically, a ranged
// write and an append. A path resolves in the sandbox as the tenant's
// commands see it (its links included), and the call runs with the
// tenant's rights. A backend whose sandboxes run the guest (oci, vm)
// serves them through it; one whose do not serves them as shell scripts
// (ShellFiles). Every backend has one.
type FileServer interface {
	// File serves call in sandbox id. A refusal the tenant can act on is
	// a *FileRefused; ErrInvalidRequest wraps a call that failed in the
	// sandbox (a cwd that does not exist, a file it may not read), with
	// the sandbox's reason. ctx bounds the call: when it ends, the call
	// is abandoned (a digest stops).
	File(ctx context.Context, id string, call FileCall) (FileResult, error)
}

// FileCall is one file call. Path is relative to Cwd, itself relative to
// the sandbox user's home (empty: the home).
type FileCall struct {
	Op     filecall.Op
	Path   string
	Cwd    string
	Offset int64
	// Length bounds a read's bytes (the agent's MaxFileBytes at most).
	Length int
	Whole  bool
	// Data is a write's bytes.
	Data []byte
}

// FileResult answers a file call.
type FileResult struct {
	// Path is the file's absolute path, its directory's links resolved.
	Path string
	// Data is a read's bytes.
	Data []byte
	// Size is the whole file's: when it was read, after it was written.
	Size int64
	// SHA256 is a digest's, in lower-case hex.
	SHA256 string
}

// FileRefused is the error of a refused file call; the agent says what
// the tenant can do about it.
type FileRefused struct {
	Why    filecall.Refusal
	Detail string
}

func (e *FileRefused) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("file call refused: %s", e.Why)
	}
	return fmt.Sprintf("file call refused: %s (%s)", e.Why, e.Detail)
}
