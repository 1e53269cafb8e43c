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

// Package filecall is the vocabulary of a file call (read, digest, write,
// and why one is refused), one for every side that speaks of it: the
// guest protocol (hostagent/guestapi) and the guest binary that serves the
// calls, and the backend contract (hostagent/backend) through which the
// kernel asks for them. It imports nothing.
package filecall

// Op names a file call.
type Op string

// The file calls.
const (
	// Read reads Length bytes from Offset; with Whole, the whole file,
	// refused (TooLarge) when it is longer than Length.
	Read Op = "read"
	// Digest answers the size and sha256 of the whole file.
	Digest Op = "digest"
	// Write replaces the file atomically: a temporary file in its
	// directory, synced, renamed over it.
	Write Op = "write"
	// WriteAt writes at Offset, creating the file, never truncating it.
	WriteAt Op = "writeAt"
	// Append appends, creating the file.
	Append Op = "append"
)

// Refusal names why a file call was refused, for the agent to explain.
type Refusal string

// The refusals of a file call.
const (
	// NoFile: nothing is at the path.
	NoFile Refusal = "nofile"
	// NotRegular: the path is no regular file, nor a link to one.
	NotRegular Refusal = "notregular"
	// TooLarge: a whole read's file is longer than Length; the detail is
	// its size.
	TooLarge Refusal = "toolarge"
	// Grew: a whole read's file grew past Length while it was read.
	Grew Refusal = "grew"
	// NoDir: the directory a write names does not exist; the detail names
	// it.
	NoDir Refusal = "nodir"
	// IsDir: a write's path is a directory.
	IsDir Refusal = "isdir"
	// InPile: a write's file is in the pile, or (a ranged write's) links
	// to a file there.
	InPile Refusal = "inpile"
	// Changed: the file's size changed while it was digested.
	Changed Refusal = "changed"
	// Short: a read stopped before Length bytes and the end of the file
	// (it shrank while it was read); the detail says where ("END of its
	// SIZE").
	Short Refusal = "short"
	// NoDigest: the sandbox has no tool to digest with (a backend that
	// serves file calls by shell, backend.ShellFiles).
	NoDigest Refusal = "nodigest"
)
