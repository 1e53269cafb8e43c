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

package guestapi

import "github.com/playground-dev/playground/hostagent/filecall"

// File calls: a Start frame whose File is set asks for no command. An
// idle shepherd serves the call itself, with the tenant's credentials,
// so that a path resolves as the tenant's commands see it (links
// included) and the call can do no more than they can:
//
//	agent                          shepherd
//	  Start{file, cwd}       ───▶
//	  Stdin… StdinEnd        ───▶  (a write's bytes, FileRequest.Size of them)
//	                         ◀───  File{refused | path, size, len, sha256}
//	                         ◀───  Stdout… (a read's bytes, File.Len of them)
//	                         ◀───  or Error{message}: the call failed
//
// A write's bytes are bounded by MaxStdin, as a command's input; a read's
// by FileRequest.Length, which the shepherd refuses past MaxStdin.

// FrameFile carries a JSON FileAnswer: the answer to a file call.
const FrameFile FrameType = 27

// FileRequest is StartRequest.File. Path is relative to the Start's Cwd
// (itself relative to TenantHome; empty: TenantHome).
type FileRequest struct {
	Op     filecall.Op `json:"op"`
	Path   string      `json:"path"`
	Offset int64       `json:"offset,omitempty"`
	Length int         `json:"length,omitempty"`
	Whole  bool        `json:"whole,omitempty"`
	// Size is how many bytes to write follow in Stdin frames (at most
	// MaxStdin): the shepherd takes them into one buffer of that size.
	Size int `json:"size,omitempty"`
}

// FileThreadName is the name of the shepherd's thread that serves a file
// call of op, while it does (a thread's comm, at most 15 bytes): what the
// tenant's ps shows of it, and how a test sees a digest run and stop.
func FileThreadName(op filecall.Op) string { return "pg-file-" + string(op) }

// MaxFilePath bounds FileRequest.Path, as Linux bounds a path (PATH_MAX).
const MaxFilePath = 4096

// FileAnswer is the payload of FrameFile.
type FileAnswer struct {
	// Refused, when set, refuses the call, and Detail says more.
	Refused filecall.Refusal `json:"refused,omitempty"`
	Detail  string           `json:"detail,omitempty"`
	// Path is the file's absolute path, its directory's links resolved.
	Path string `json:"path,omitempty"`
	// Size is the whole file's size: when it was read, after it was
	// written.
	Size int64 `json:"size"`
	// Len is how many bytes of a read follow, in Stdout frames.
	Len int `json:"len,omitempty"`
	// SHA256 is a digest's, in lower-case hex.
	SHA256 string `json:"sha256,omitempty"`
}
