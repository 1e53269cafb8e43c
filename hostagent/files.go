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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Files is the file service. File calls are served in the sandbox by its
// backend's FileServer (the guest, for the backends that run it; shell
// scripts through Exec for the others: backend.ShellFiles), as the
// tenant's user, so that paths resolve exactly as the tenant's commands
// see them (symlinks included) and no host path is ever touched. Every
// call runs through call, within Options.FileTimeout and the call: when
// either ends, the call is abandoned in the sandbox. It has no state of
// its own.
type Files struct {
	sessions handleResolver
	calls    fileCalls
	spans    sandboxSpans
	// maxBytes bounds a read or a write (Options.MaxFileBytes), timeout
	// a call (Options.FileTimeout).
	maxBytes int
	timeout  time.Duration
}

// handleResolver is what the services whose calls name a session handle
// ask of the sessions service: the sandbox behind the tenant's handle,
// whose lease the call renews.
type handleResolver interface {
	resolve(tenant, handleID string) (backend.Spec, backend.Backend, error)
}

// fileCalls is what the file service asks before and after it reaches a
// sandbox: callGate, and the answer to a call its sandbox's freeze for
// its usage limit ended (frozenRefusal).
type fileCalls interface {
	callGate
	frozenRefusal(id string) error
}

// FileContent is a file, or a range of one, read from a sandbox.
type FileContent struct {
	// Path is absolute, its directory's links resolved.
	Path string
	Data []byte
	// Size is len(Data).
	Size int
	MIME string
	// SHA256 is the digest of Data: of the whole file for a whole read,
	// of the range for a ranged one.
	SHA256 string
	// FileSize is the size of the whole file when it was read.
	FileSize int64
	// Offset is where Data starts in the file.
	Offset int64
	// EOF is true when Data reaches the end of the file.
	EOF bool
}

// FileInfo describes a file written to a sandbox.
type FileInfo struct {
	Path string
	// Size is the number of bytes written, and SHA256 their digest: for a
	// ranged write, of the range, not of the whole file.
	Size   int
	MIME   string
	SHA256 string
	// FileSize is the size of the whole file after the write.
	FileSize int64
}

// FileDigest is the size and sha256 of a whole file.
type FileDigest struct {
	Path   string
	Size   int64
	SHA256 string
}

// Range selects the bytes of a ranged read.
type Range struct {
	// Offset is the first byte's, from the start of the file.
	Offset int64
	// Length bounds the bytes read, 1 to Options.MaxFileBytes; 0 means
	// up to MaxFileBytes.
	Length int
}

func checkPath(p string) error {
	switch {
	case p == "":
		return errorf(agentapi.CodeInvalid, "path is empty: give a file path, absolute or relative to cwd (default: the home directory)")
	case len(p) > 4096:
		return errorf(agentapi.CodeInvalid, "path is %d bytes long (limit 4096)", len(p))
	case strings.ContainsRune(p, 0):
		return errorf(agentapi.CodeInvalid, "path contains a NUL byte")
	}
	return nil
}

// ReadFile returns a whole file of up to MaxFileBytes; a larger file is
// refused, never truncated.
func (f *Files) ReadFile(ctx context.Context, tenant, handleID, filePath, cwd string) (FileContent, error) {
	if err := checkPath(filePath); err != nil {
		return FileContent{}, err
	}
	res, err := f.call(ctx, tenant, handleID, filePath, backend.FileCall{Op: filecall.Read, Path: filePath, Cwd: cwd, Length: f.maxBytes, Whole: true})
	if err != nil {
		return FileContent{}, err
	}
	return FileContent{
		Path:     res.Path,
		Data:     res.Data,
		Size:     len(res.Data),
		MIME:     DetectMIME(filePath, res.Data),
		SHA256:   sha256Hex(res.Data),
		FileSize: int64(len(res.Data)),
		EOF:      true,
	}, nil
}

// WriteFile replaces a file atomically: the data goes to a temporary file in
// the same directory, is synced, and is renamed over the target. A reader
// sees the old file or the new one, never a part. Files in the append-only
// pile cannot be replaced.
func (f *Files) WriteFile(ctx context.Context, tenant, handleID, filePath, cwd string, data []byte) (FileInfo, error) {
	if err := checkPath(filePath); err != nil {
		return FileInfo{}, err
	}
	if len(data) > f.maxBytes {
		return FileInfo{}, errorf(agentapi.CodeTooLarge, "the payload is %d bytes, over the %d-byte write limit: split it into several files, or write parts and join them with exec (cat a b > c)", len(data), f.maxBytes)
	}
	res, err := f.call(ctx, tenant, handleID, filePath, backend.FileCall{Op: filecall.Write, Path: filePath, Cwd: cwd, Data: data})
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{
		Path:     res.Path,
		Size:     len(data),
		MIME:     DetectMIME(filePath, data),
		SHA256:   sha256Hex(data),
		FileSize: int64(len(data)),
	}, nil
}

// ReadFileRange reads up to r.Length bytes of a file from r.Offset: a file
// of any size is read in ranges of at most MaxFileBytes, one call each. An
// offset at or past the end of the file reads no bytes and reports EOF.
// Each range is read on its own: a file that changes between two calls
// gives ranges of two versions, which comparing the bytes read with
// DigestFile reveals.
func (f *Files) ReadFileRange(ctx context.Context, tenant, handleID, filePath, cwd string, r Range) (FileContent, error) {
	if err := checkPath(filePath); err != nil {
		return FileContent{}, err
	}
	if r.Offset < 0 {
		return FileContent{}, errorf(agentapi.CodeInvalid, "%s", agentapi.NegativeOffset(r.Offset))
	}
	if r.Length < 0 || r.Length > f.maxBytes {
		return FileContent{}, errorf(agentapi.CodeInvalid, "%s", agentapi.LengthOutOfRange(r.Length, f.maxBytes))
	}
	length := r.Length
	if length == 0 {
		length = f.maxBytes
	}
	res, err := f.call(ctx, tenant, handleID, filePath, backend.FileCall{Op: filecall.Read, Path: filePath, Cwd: cwd, Offset: r.Offset, Length: length})
	if err != nil {
		return FileContent{}, err
	}
	end := r.Offset + int64(len(res.Data))
	return FileContent{
		Path:     res.Path,
		Data:     res.Data,
		Size:     len(res.Data),
		MIME:     rangeMIME(filePath, r.Offset, res.Data),
		SHA256:   sha256Hex(res.Data),
		FileSize: res.Size,
		Offset:   r.Offset,
		EOF:      end >= res.Size,
	}, nil
}

// DigestFile returns the size and sha256 of a whole file of any size,
// without its content: what a client compares with the bytes it read or
// wrote in ranges, to know it has the whole file. It reads the whole file
// in the sandbox (about a second per GiB), within Options.FileTimeout.
func (f *Files) DigestFile(ctx context.Context, tenant, handleID, filePath, cwd string) (FileDigest, error) {
	if err := checkPath(filePath); err != nil {
		return FileDigest{}, err
	}
	res, err := f.call(ctx, tenant, handleID, filePath, backend.FileCall{Op: filecall.Digest, Path: filePath, Cwd: cwd})
	if err != nil {
		return FileDigest{}, err
	}
	return FileDigest{Path: res.Path, Size: res.Size, SHA256: res.SHA256}, nil
}

// AppendFile appends data to a file, creating it if it is missing: a file
// of any size is written in ranges of at most MaxFileBytes, one call each.
// It is not atomic: a reader may see part of the bytes, and a failed call
// may have written part of them. Files in the pile, or that link into it,
// are refused as WriteFile refuses them.
func (f *Files) AppendFile(ctx context.Context, tenant, handleID, filePath, cwd string, data []byte) (FileInfo, error) {
	return f.writeRange(ctx, tenant, handleID, filePath, cwd, -1, data)
}

// WriteFileAt writes data into a file at byte offset, creating the file
// if it is missing and never truncating it: bytes past the range keep
// theirs, and a range that starts past the end leaves a gap of zero bytes
// before it. Ranges may be written in any order. It is not atomic, and it
// refuses the pile, as AppendFile.
func (f *Files) WriteFileAt(ctx context.Context, tenant, handleID, filePath, cwd string, offset int64, data []byte) (FileInfo, error) {
	if offset < 0 {
		return FileInfo{}, errorf(agentapi.CodeInvalid, "%s", agentapi.NegativeOffset(offset))
	}
	return f.writeRange(ctx, tenant, handleID, filePath, cwd, offset, data)
}

// writeRange writes data at offset, or appends it when offset is -1.
func (f *Files) writeRange(ctx context.Context, tenant, handleID, filePath, cwd string, offset int64, data []byte) (FileInfo, error) {
	if err := checkPath(filePath); err != nil {
		return FileInfo{}, err
	}
	if len(data) > f.maxBytes {
		return FileInfo{}, errorf(agentapi.CodeTooLarge, "the payload is %d bytes, over the %d-byte write limit: write it in ranges of at most %d bytes, one call each", len(data), f.maxBytes, f.maxBytes)
	}
	call := backend.FileCall{Op: filecall.WriteAt, Path: filePath, Cwd: cwd, Offset: offset, Data: data}
	if offset < 0 {
		call.Op, call.Offset = filecall.Append, 0
	}
	res, err := f.call(ctx, tenant, handleID, filePath, call)
	if err != nil {
		return FileInfo{}, err
	}
	start := offset
	if start < 0 {
		start = res.Size - int64(len(data))
	}
	return FileInfo{
		Path:     res.Path,
		Size:     len(data),
		MIME:     rangeMIME(filePath, start, data),
		SHA256:   sha256Hex(data),
		FileSize: res.Size,
	}, nil
}

// call has the handle's sandbox serve call, through its backend's
// FileServer, within Options.FileTimeout: past it, as when ctx ends, the
// call is abandoned in the sandbox, and a timeout is an error that names
// the bound. A refusal becomes the error that tells the tenant what to do.
func (f *Files) call(ctx context.Context, tenant, handleID, filePath string, call backend.FileCall) (_ backend.FileResult, err error) {
	spec, be, err := f.sessions.resolve(tenant, handleID)
	if err != nil {
		return backend.FileResult{}, err
	}
	if err := f.calls.chargeable(ctx, spec, be); err != nil {
		return backend.FileResult{}, err
	}
	ctx, done, err := f.calls.awaken(ctx, spec.ID)
	if err != nil {
		return backend.FileResult{}, err
	}
	defer done()
	ctx, span := f.spans.start(ctx, "sandbox file", spec.ID, be)
	defer func() { endSpan(span, err) }()
	fs := be.Capabilities().FileServer
	if fs == nil {
		fs = backend.ShellFiles(be)
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	res, err := fs.File(cctx, spec.ID, call)
	switch {
	case err == nil:
		return res, nil
	case frozenCause(ctx):
		return backend.FileResult{}, f.calls.frozenRefusal(spec.ID)
	case cctx.Err() != nil && ctx.Err() == nil:
		return backend.FileResult{}, f.timeoutError(call.Op, filePath)
	case ctx.Err() != nil:
		return backend.FileResult{}, ctx.Err()
	}
	var refused *backend.FileRefused
	if errors.As(err, &refused) {
		return backend.FileResult{}, f.refusal(spec, call, filePath, refused)
	}
	switch {
	case errors.Is(err, backend.ErrInvalidRequest):
		why := strings.TrimPrefix(err.Error(), backend.ErrInvalidRequest.Error()+": ")
		return backend.FileResult{}, &agentapi.Error{Code: agentapi.CodeInvalid, Err: err, Message: fileFailed(call.Op, filePath, why)}
	case errors.Is(err, backend.ErrExhausted), errors.Is(err, backend.ErrNotFound), errors.Is(err, backend.ErrNotRunning):
		return backend.FileResult{}, execError(err)
	}
	return backend.FileResult{}, &agentapi.Error{Code: agentapi.CodeInternal, Err: err, Message: fileFailed(call.Op, filePath, err.Error())}
}

// fileVerb says what call does to a file ("reading").
func fileVerb(op filecall.Op) string {
	switch op {
	case filecall.Read:
		return "reading"
	case filecall.Digest:
		return "digesting"
	}
	return "writing"
}

// fileFailed says that a call failed in the sandbox, and why.
func fileFailed(op filecall.Op, filePath, why string) string {
	switch op {
	case filecall.Write:
		return fmt.Sprintf("writing %q failed, the file is unchanged: %s", filePath, why)
	case filecall.WriteAt, filecall.Append:
		return fmt.Sprintf("writing %q failed: %s; a ranged write is not atomic, so part of the range may have been written: write the range again once the cause is fixed", filePath, why)
	}
	return fmt.Sprintf("%s %q failed: %s", fileVerb(op), filePath, why)
}

// timeoutError is the error of a call that took longer than FileTimeout.
func (f *Files) timeoutError(op filecall.Op, filePath string) error {
	e := errorf(agentapi.CodeUnavailable, "%s %q took longer than the %s a file operation may take (the agent's --file-timeout), and was stopped", fileVerb(op), filePath, f.timeout)
	switch fileVerb(op) {
	case "digesting":
		e.Message += ": the file is too large to digest in one call; compare the sha256 of each range you read or wrote instead"
	case "writing":
		e.Message += "; a ranged write may have written part of its range: retry once the sandbox is less busy"
	default:
		e.Message += ": retry once the sandbox is less busy"
	}
	return e
}

// refusal says why the sandbox refused a call on filePath, and what to do
// instead.
func (f *Files) refusal(spec backend.Spec, call backend.FileCall, filePath string, r *backend.FileRefused) error {
	ranged := call.Op == filecall.WriteAt || call.Op == filecall.Append
	switch r.Why {
	case filecall.NoFile:
		return errorf(agentapi.CodeNotFound, "no such file %q (relative paths start at cwd, or at the home directory without one)", filePath)
	case filecall.NotRegular:
		switch {
		case call.Op == filecall.Digest:
			return errorf(agentapi.CodeInvalid, "%q is not a regular file: only a regular file has a digest", filePath)
		case ranged:
			return errorf(agentapi.CodeInvalid, "%q is not a regular file, nor a link to one: write appends to and writes into regular files only", filePath)
		}
		return errorf(agentapi.CodeInvalid, "%q is not a regular file: read reads files; list directories with exec (ls)", filePath)
	case filecall.TooLarge:
		return errorf(agentapi.CodeTooLarge, "%q is %s bytes, over the %d-byte read limit; read refuses rather than truncates: use exec (head, tail, split) or job_exec to page through it", filePath, r.Detail, f.maxBytes)
	case filecall.Grew:
		return errorf(agentapi.CodeTooLarge, "%q grew past the %d-byte read limit while it was read; read refuses rather than truncates", filePath, f.maxBytes)
	case filecall.Short:
		return errorf(agentapi.CodeUnavailable, "reading %q stopped at byte %s: it shrank while it was read, or could not be read: read the range again", filePath, r.Detail)
	case filecall.NoDir:
		return errorf(agentapi.CodeNotFound, "the directory %q does not exist: create it first with exec (mkdir -p)", r.Detail)
	case filecall.IsDir:
		return errorf(agentapi.CodeInvalid, "%q is a directory: give a file path", filePath)
	case filecall.InPile:
		return pileRefusal(spec, filePath, ranged)
	case filecall.NoDigest:
		return errorf(agentapi.CodeUnavailable, "the sandbox has neither sha256sum nor sha256 to digest %q with: install one in the sandbox (coreutils), or compare the sha256 of each range instead", filePath)
	case filecall.Changed:
		return errorf(agentapi.CodeUnavailable, "%q changed while it was digested: digest it again once nothing writes to it", filePath)
	}
	return &agentapi.Error{Code: agentapi.CodeInternal, Err: r, Message: fileFailed(call.Op, filePath, r.Error())}
}

// rangeMIME names a range's media type: the file's by its name, else by
// the content of its first range; a later range's bytes say nothing of
// the file's.
func rangeMIME(name string, offset int64, data []byte) string {
	if offset == 0 {
		return DetectMIME(name, data)
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// pileRefusal says why write cannot write filePath, in the pile: write
// replaces files, which the pile refuses (its files are append-only and
// its directory the sandbox root's), and leaves the growing of its files
// to the tenant's own commands, ranged writes included; under gVisor
// nothing reaches it.
func pileRefusal(spec backend.Spec, filePath string, ranged bool) error {
	if backend.IsolationOf(spec) == backend.IsolationGVisor {
		return errorf(agentapi.CodeInvalid, "%q is in the pile (%s), which is read-only under gVisor isolation: nothing in the sandbox can write or append to it, nor create a file there (docs/isolation.md); keep the file in the home directory or /workspace", filePath, guestapi.PileDir)
	}
	if ranged {
		return errorf(agentapi.CodeInvalid, "%q is, or links to, a file in the pile (%s), which is append-only: write does not write there, not even by append or at an offset, so that only the tenant's own commands grow the pile; append to one of its files with exec (printf '...' >> %s/FILE), or keep the file in the home directory or /workspace", filePath, guestapi.PileDir, guestapi.PileDir)
	}
	return errorf(agentapi.CodeInvalid, "%q is in the pile (%s), which is append-only: write replaces whole files, which the pile refuses, and only the files already there can grow; append to one with exec (printf '...' >> %s/FILE), or keep the file in the home directory or /workspace", filePath, guestapi.PileDir, guestapi.PileDir)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// DetectMIME names a file's media type from its extension, else its content.
func DetectMIME(name string, data []byte) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}
