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

// FileOp names a file call.
type FileOp string

// The file calls.
const (
	// FileRead reads Length bytes from Offset; with Whole, the whole file,
	// refused (FileTooLarge) when it is longer than Length.
	FileRead FileOp = "read"
	// FileDigest answers the size and sha256 of the whole file.
	FileDigest FileOp = "digest"
	// FileWrite replaces the file with Data atomically.
	FileWrite FileOp = "write"
	// FileWriteAt writes Data at Offset, creating the file, never
	// truncating it.
	FileWriteAt FileOp = "writeAt"
	// FileAppend appends Data, creating the file.
	FileAppend FileOp = "append"
)

// FileCall is one file call. Path is relative to Cwd, itself relative to
// the sandbox user's home (empty: the home).
type FileCall struct {
	Op     FileOp
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

// FileRefusal names why a file call was refused.
type FileRefusal string

// The refusals of a file call.
const (
	// FileNoFile: nothing is at the path.
	FileNoFile FileRefusal = "nofile"
	// FileNotRegular: the path is no regular file, nor a link to one.
	FileNotRegular FileRefusal = "notregular"
	// FileTooLarge: a whole read's file is longer than Length; Detail is
	// its size.
	FileTooLarge FileRefusal = "toolarge"
	// FileGrew: a whole read's file grew past Length while it was read.
	FileGrew FileRefusal = "grew"
	// FileNoDir: the directory a write names does not exist (Detail).
	FileNoDir FileRefusal = "nodir"
	// FileIsDir: a write's path is a directory.
	FileIsDir FileRefusal = "isdir"
	// FileInPile: a write's file is in the pile, or (a ranged write's)
	// links to a file there.
	FileInPile FileRefusal = "inpile"
	// FileChanged: the file's size changed while it was digested.
	FileChanged FileRefusal = "changed"
	// FileShort: a ranged read stopped before its length and the end of
	// the file (it shrank while it was read); Detail says where ("END of
	// its SIZE").
	FileShort FileRefusal = "short"
	// FileNoDigest: the sandbox has no tool to digest with (ShellFiles).
	FileNoDigest FileRefusal = "nodigest"
)

// FileRefused is the error of a refused file call; the agent says what
// the tenant can do about it.
type FileRefused struct {
	Why    FileRefusal
	Detail string
}

func (e *FileRefused) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("file call refused: %s", e.Why)
	}
	return fmt.Sprintf("file call refused: %s (%s)", e.Why, e.Detail)
}
