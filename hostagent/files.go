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
	"fmt"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// File transfer runs inside the sandbox, in a clean shell as the tenant's
// user, so that paths resolve exactly as the tenant's commands see them
// (symlinks included) and no host path is ever touched. Every operation
// runs through fileExec, within Options.FileTimeout and the call: when
// either ends, its processes are killed. The exit codes below are the
// scripts' own, outside the range the utilities they call use.
const (
	exitNoFile     = 66
	exitNotRegular = 67
	exitTooLarge   = 68
	exitNoDir      = 69
	exitIsDir      = 70
	exitInPile     = 71
	exitNoDigest   = 72
	exitChanged    = 73
)

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
		return errorf(CodeInvalid, "path is empty: give a file path, absolute or relative to cwd (default: the home directory)")
	case len(p) > 4096:
		return errorf(CodeInvalid, "path is %d bytes long (limit 4096)", len(p))
	case strings.ContainsRune(p, 0):
		return errorf(CodeInvalid, "path contains a NUL byte")
	}
	return nil
}

// ReadFile returns a whole file of up to MaxFileBytes; a larger file is
// refused, never truncated.
func (a *Agent) ReadFile(ctx context.Context, tenant, handleID, filePath, cwd string) (FileContent, error) {
	if err := checkPath(filePath); err != nil {
		return FileContent{}, err
	}
	script := fmt.Sprintf(`f=%s
[ -e "$f" ] || { echo "no such file" >&2; exit %d; }
[ -f "$f" ] || { echo "not a regular file" >&2; exit %d; }
s=$(wc -c < "$f") || exit 1
[ "$s" -le %d ] || { echo "$s" >&2; exit %d; }
printf '%%s/%%s' "$(cd -- "$(dirname -- "$f")" 2>/dev/null && pwd -P)" "$(basename -- "$f")" >&2
exec cat -- "$f"`, backend.ShellQuote(filePath), exitNoFile, exitNotRegular, a.opts.MaxFileBytes, exitTooLarge)
	res, err := a.fileExec(ctx, tenant, handleID, "reading", filePath, cwd, script, nil)
	if err != nil {
		return FileContent{}, err
	}
	stderr := strings.TrimSpace(string(res.Stderr))
	switch res.ExitCode {
	case 0:
	case exitNoFile:
		return FileContent{}, errorf(CodeNotFound, "no such file %q (relative paths start at cwd, or at the home directory without one)", filePath)
	case exitNotRegular:
		return FileContent{}, errorf(CodeInvalid, "%q is not a regular file: read reads files; list directories with exec (ls)", filePath)
	case exitTooLarge:
		return FileContent{}, errorf(CodeTooLarge, "%q is %s bytes, over the %d-byte read limit; read refuses rather than truncates: use exec (head, tail, split) or job_exec to page through it", filePath, stderr, a.opts.MaxFileBytes)
	default:
		return FileContent{}, errorf(CodeInvalid, "reading %q failed (exit %d): %s", filePath, res.ExitCode, stderr)
	}
	if res.StdoutDropped > 0 || len(res.Stdout) > a.opts.MaxFileBytes {
		return FileContent{}, errorf(CodeTooLarge, "%q grew past the %d-byte read limit while it was read; read refuses rather than truncates", filePath, a.opts.MaxFileBytes)
	}
	// The path as write gives it: absolute, its directory's links
	// resolved, so that either answer names the file for any cwd.
	abs := string(res.Stderr)
	if !strings.HasPrefix(abs, "/") || strings.ContainsRune(abs, '\n') {
		abs = filePath
	}
	return FileContent{
		Path:     abs,
		Data:     res.Stdout,
		Size:     len(res.Stdout),
		MIME:     DetectMIME(filePath, res.Stdout),
		SHA256:   sha256Hex(res.Stdout),
		FileSize: int64(len(res.Stdout)),
		EOF:      true,
	}, nil
}

// WriteFile replaces a file atomically: the data goes to a temporary file in
// the same directory, is synced, and is renamed over the target. A reader
// sees the old file or the new one, never a part. Files in the append-only
// pile cannot be replaced.
func (a *Agent) WriteFile(ctx context.Context, tenant, handleID, filePath, cwd string, data []byte) (FileInfo, error) {
	if err := checkPath(filePath); err != nil {
		return FileInfo{}, err
	}
	if len(data) > a.opts.MaxFileBytes {
		return FileInfo{}, errorf(CodeTooLarge, "the payload is %d bytes, over the %d-byte write limit: split it into several files, or write parts and join them with exec (cat a b > c)", len(data), a.opts.MaxFileBytes)
	}
	script := fmt.Sprintf(`f=%s
d=$(dirname -- "$f")
[ -d "$d" ] || { echo "$d" >&2; exit %d; }
[ ! -d "$f" ] || exit %d
r=$(cd -- "$d" && pwd -P) || exit 1
case "$r/" in %s/*) exit %d;; esac
t=$(mktemp "$d/.playground-write.XXXXXX") || exit 1
trap 'rm -f -- "$t"' EXIT
cat > "$t" || exit 1
[ ! -e "$f" ] || chmod --reference="$f" -- "$t" 2>/dev/null || true
sync -- "$t" || exit 1
mv -f -- "$t" "$f" || exit 1
trap - EXIT
printf '%%s/%%s' "$r" "$(basename -- "$f")"`, backend.ShellQuote(filePath), exitNoDir, exitIsDir, guestapi.PileDir, exitInPile)
	res, err := a.fileExec(ctx, tenant, handleID, "writing", filePath, cwd, script, data)
	if err != nil {
		return FileInfo{}, err
	}
	stderr := strings.TrimSpace(string(res.Stderr))
	switch res.ExitCode {
	case 0:
	case exitNoDir:
		return FileInfo{}, errorf(CodeNotFound, "the directory %q does not exist: create it first with exec (mkdir -p)", stderr)
	case exitIsDir:
		return FileInfo{}, errorf(CodeInvalid, "%q is a directory: give a file path", filePath)
	case exitInPile:
		return FileInfo{}, a.pileRefusal(tenant, handleID, filePath, false)
	default:
		return FileInfo{}, errorf(CodeInvalid, "writing %q failed (exit %d), the file is unchanged: %s", filePath, res.ExitCode, stderr)
	}
	return FileInfo{
		Path:     string(res.Stdout),
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
func (a *Agent) ReadFileRange(ctx context.Context, tenant, handleID, filePath, cwd string, r Range) (FileContent, error) {
	if err := checkPath(filePath); err != nil {
		return FileContent{}, err
	}
	if r.Offset < 0 {
		return FileContent{}, errorf(CodeInvalid, "%s", agentapi.NegativeOffset(r.Offset))
	}
	if r.Length < 0 || r.Length > a.opts.MaxFileBytes {
		return FileContent{}, errorf(CodeInvalid, "%s", agentapi.LengthOutOfRange(r.Length, a.opts.MaxFileBytes))
	}
	length := r.Length
	if length == 0 {
		length = a.opts.MaxFileBytes
	}
	// tail -c +N seeks on a regular file (GNU, FreeBSD), so a range deep
	// in a large file costs what its own bytes cost.
	script := fmt.Sprintf(`f=%s
[ -e "$f" ] || exit %d
[ -f "$f" ] || exit %d
s=$(wc -c < "$f") || exit 1
printf '%%s\n%%s/%%s' "$s" "$(cd -- "$(dirname -- "$f")" 2>/dev/null && pwd -P)" "$(basename -- "$f")" >&2
[ "$s" -gt %d ] || exit 0
tail -c +%d -- "$f" | head -c %d`, backend.ShellQuote(filePath), exitNoFile, exitNotRegular, r.Offset, uint64(r.Offset)+1, length)
	res, err := a.fileExec(ctx, tenant, handleID, "reading", filePath, cwd, script, nil)
	if err != nil {
		return FileContent{}, err
	}
	switch res.ExitCode {
	case 0:
	case exitNoFile:
		return FileContent{}, errorf(CodeNotFound, "no such file %q (relative paths start at cwd, or at the home directory without one)", filePath)
	case exitNotRegular:
		return FileContent{}, errorf(CodeInvalid, "%q is not a regular file: read reads files; list directories with exec (ls)", filePath)
	default:
		return FileContent{}, errorf(CodeInvalid, "reading %q failed (exit %d): %s", filePath, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	size, abs, ok := sizeAndPath(string(res.Stderr))
	if !ok {
		return FileContent{}, &Error{Code: CodeInternal, Message: fmt.Sprintf("reading %q: the sandbox did not say the file's size: %q", filePath, res.Stderr)}
	}
	if abs == "" {
		abs = filePath
	}
	data := res.Stdout
	if res.StdoutDropped > 0 || len(data) > length {
		return FileContent{}, errorf(CodeTooLarge, "the range of %q is over the agent's %d-byte output limit: ask for a shorter length", filePath, a.opts.ExecOutputLimit)
	}
	end := r.Offset + int64(len(data))
	if len(data) < length && end < size {
		return FileContent{}, errorf(CodeUnavailable, "reading %q stopped at byte %d of its %d: it shrank while it was read, or could not be read: read the range again", filePath, end, size)
	}
	if len(data) > 0 {
		size = max(size, end) // it grew while it was read
	}
	return FileContent{
		Path:     abs,
		Data:     data,
		Size:     len(data),
		MIME:     rangeMIME(filePath, r.Offset, data),
		SHA256:   sha256Hex(data),
		FileSize: size,
		Offset:   r.Offset,
		EOF:      end >= size,
	}, nil
}

// DigestFile returns the size and sha256 of a whole file of any size,
// without its content: what a client compares with the bytes it read or
// wrote in ranges, to know it has the whole file. It reads the whole file
// in the sandbox (about a second per GiB), within Options.FileTimeout.
func (a *Agent) DigestFile(ctx context.Context, tenant, handleID, filePath, cwd string) (FileDigest, error) {
	if err := checkPath(filePath); err != nil {
		return FileDigest{}, err
	}
	// sha256sum is GNU's and BusyBox's, sha256 -q FreeBSD's. A size
	// that differs after the hash means a writer was at work meanwhile.
	script := fmt.Sprintf(`f=%s
[ -e "$f" ] || exit %d
[ -f "$f" ] || exit %d
s=$(wc -c < "$f") || exit 1
if command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < "$f") || exit 1
elif command -v sha256 >/dev/null 2>&1; then h=$(sha256 -q < "$f") || exit 1
else exit %d
fi
[ "$(wc -c < "$f")" = "$s" ] || exit %d
printf '%%s\n%%s\n%%s/%%s' "${h%%%% *}" "$s" "$(cd -- "$(dirname -- "$f")" 2>/dev/null && pwd -P)" "$(basename -- "$f")"`,
		backend.ShellQuote(filePath), exitNoFile, exitNotRegular, exitNoDigest, exitChanged)
	res, err := a.fileExec(ctx, tenant, handleID, "digesting", filePath, cwd, script, nil)
	if err != nil {
		return FileDigest{}, err
	}
	switch res.ExitCode {
	case 0:
	case exitNoFile:
		return FileDigest{}, errorf(CodeNotFound, "no such file %q (relative paths start at cwd, or at the home directory without one)", filePath)
	case exitNotRegular:
		return FileDigest{}, errorf(CodeInvalid, "%q is not a regular file: only a regular file has a digest", filePath)
	case exitNoDigest:
		return FileDigest{}, errorf(CodeUnavailable, "the sandbox has neither sha256sum nor sha256 to digest %q with: install one in the sandbox (coreutils), or compare the sha256 of each range instead", filePath)
	case exitChanged:
		return FileDigest{}, errorf(CodeUnavailable, "%q changed while it was digested: digest it again once nothing writes to it", filePath)
	default:
		return FileDigest{}, errorf(CodeInvalid, "digesting %q failed (exit %d): %s", filePath, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	sum, rest, _ := strings.Cut(string(res.Stdout), "\n")
	size, abs, ok := sizeAndPath(rest)
	if b, err := hex.DecodeString(sum); !ok || err != nil || len(b) != sha256.Size {
		return FileDigest{}, &Error{Code: CodeInternal, Message: fmt.Sprintf("digesting %q: the sandbox answered no size and sha256: %q", filePath, res.Stdout)}
	}
	if abs == "" {
		abs = filePath
	}
	return FileDigest{Path: abs, Size: size, SHA256: strings.ToLower(sum)}, nil
}

// AppendFile appends data to a file, creating it if it is missing: a file
// of any size is written in ranges of at most MaxFileBytes, one call each.
// It is not atomic: a reader may see part of the bytes, and a failed call
// may have written part of them. Files in the pile, or that link into it,
// are refused as WriteFile refuses them.
func (a *Agent) AppendFile(ctx context.Context, tenant, handleID, filePath, cwd string, data []byte) (FileInfo, error) {
	return a.writeRange(ctx, tenant, handleID, filePath, cwd, -1, data)
}

// WriteFileAt writes data into a file at byte offset, creating the file
// if it is missing and never truncating it: bytes past the range keep
// theirs, and a range that starts past the end leaves a gap of zero bytes
// before it. Ranges may be written in any order. It is not atomic, and it
// refuses the pile, as AppendFile.
func (a *Agent) WriteFileAt(ctx context.Context, tenant, handleID, filePath, cwd string, offset int64, data []byte) (FileInfo, error) {
	if offset < 0 {
		return FileInfo{}, errorf(CodeInvalid, "%s", agentapi.NegativeOffset(offset))
	}
	return a.writeRange(ctx, tenant, handleID, filePath, cwd, offset, data)
}

// writeRange writes data at offset, or appends it when offset is -1.
func (a *Agent) writeRange(ctx context.Context, tenant, handleID, filePath, cwd string, offset int64, data []byte) (FileInfo, error) {
	if err := checkPath(filePath); err != nil {
		return FileInfo{}, err
	}
	if len(data) > a.opts.MaxFileBytes {
		return FileInfo{}, errorf(CodeTooLarge, "the payload is %d bytes, over the %d-byte write limit: write it in ranges of at most %d bytes, one call each", len(data), a.opts.MaxFileBytes, a.opts.MaxFileBytes)
	}
	put := `cat >> "$f" || exit 1`
	if offset >= 0 {
		// The file open read-write, neither truncated nor appended to;
		// dd moves the offset all its descriptors share (an lseek: bs=1
		// costs nothing), and cat writes from there. POSIX dd and sh,
		// unlike GNU dd's oflag=seek_bytes.
		put = fmt.Sprintf(`{ e=$(dd if=/dev/null bs=1 seek=%d conv=notrunc 2>&1 >&3) || { printf '%%s\n' "$e" >&2; exit 1; }
  cat >&3 || exit 1
} 3<> "$f" || exit 1`, offset)
	}
	// The pile is refused by the directory the file is in, and by the
	// one a link leads to: appending through a link would reach it.
	script := fmt.Sprintf(`f=%s
d=$(dirname -- "$f")
[ -d "$d" ] || { echo "$d" >&2; exit %d; }
[ ! -d "$f" ] || exit %d
[ ! -e "$f" ] || [ -f "$f" ] || exit %d
r=$(cd -- "$d" && pwd -P) || exit 1
case "$r/" in %s/*) exit %d;; esac
if [ -L "$f" ]; then
  t=$(readlink -f -- "$f") || exit %d
  case "$(dirname -- "$t")/" in %s/*) exit %d;; esac
fi
%s
s=$(wc -c < "$f") || exit 1
printf '%%s\n%%s/%%s' "$s" "$r" "$(basename -- "$f")"`,
		backend.ShellQuote(filePath), exitNoDir, exitIsDir, exitNotRegular, guestapi.PileDir, exitInPile,
		exitNotRegular, guestapi.PileDir, exitInPile, put)
	res, err := a.fileExec(ctx, tenant, handleID, "writing", filePath, cwd, script, data)
	if err != nil {
		return FileInfo{}, err
	}
	stderr := strings.TrimSpace(string(res.Stderr))
	switch res.ExitCode {
	case 0:
	case exitNoDir:
		return FileInfo{}, errorf(CodeNotFound, "the directory %q does not exist: create it first with exec (mkdir -p)", stderr)
	case exitIsDir:
		return FileInfo{}, errorf(CodeInvalid, "%q is a directory: give a file path", filePath)
	case exitNotRegular:
		return FileInfo{}, errorf(CodeInvalid, "%q is not a regular file, nor a link to one: write appends to and writes into regular files only", filePath)
	case exitInPile:
		return FileInfo{}, a.pileRefusal(tenant, handleID, filePath, true)
	default:
		return FileInfo{}, errorf(CodeInvalid, "writing %q failed (exit %d): %s; a ranged write is not atomic, so part of the range may have been written: write the range again once the cause is fixed", filePath, res.ExitCode, stderr)
	}
	size, abs, ok := sizeAndPath(string(res.Stdout))
	if !ok {
		return FileInfo{}, &Error{Code: CodeInternal, Message: fmt.Sprintf("writing %q: the sandbox did not say the file's size: %q", filePath, res.Stdout)}
	}
	if abs == "" {
		abs = filePath
	}
	start := offset
	if start < 0 {
		start = size - int64(len(data))
	}
	return FileInfo{
		Path:     abs,
		Size:     len(data),
		MIME:     rangeMIME(filePath, start, data),
		SHA256:   sha256Hex(data),
		FileSize: size,
	}, nil
}

// fileExec runs a file operation's script in a clean shell of the
// handle's sandbox, with stdin, within Options.FileTimeout: past it, as
// when ctx ends, the script and every process it started are killed
// (Exec), and a timeout is an error that names the bound. what says what
// the operation does to filePath ("reading"), for the error.
func (a *Agent) fileExec(ctx context.Context, tenant, handleID, what, filePath, cwd, script string, stdin []byte) (ExecResult, error) {
	res, err := a.Exec(ctx, tenant, handleID, ExecRequest{Command: script, Shell: backend.ShellClean, Cwd: cwd, Stdin: stdin, Timeout: a.opts.FileTimeout})
	if err != nil || !res.TimedOut {
		return res, err
	}
	e := errorf(CodeUnavailable, "%s %q took longer than the %s a file operation may take (the agent's --file-timeout), and was stopped", what, filePath, a.opts.FileTimeout)
	switch what {
	case "digesting":
		e.Message += ": the file is too large to digest in one call; compare the sha256 of each range you read or wrote instead"
	case "writing":
		e.Message += "; a ranged write may have written part of its range: retry once the sandbox is less busy"
	default:
		e.Message += ": retry once the sandbox is less busy"
	}
	return res, e
}

// sizeAndPath reads the "SIZE\nPATH" the ranged scripts print: the size
// as wc gives it (BSD's with blanks before it) and the path as the
// scripts resolve it, "" when it is no absolute path on one line.
func sizeAndPath(s string) (size int64, abs string, ok bool) {
	sizeText, abs, _ := strings.Cut(s, "\n")
	size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 10, 64)
	if err != nil || size < 0 {
		return 0, "", false
	}
	if !strings.HasPrefix(abs, "/") || strings.ContainsRune(abs, '\n') {
		abs = ""
	}
	return size, abs, true
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
func (a *Agent) pileRefusal(tenant, handleID, filePath string, ranged bool) error {
	if spec, _, err := a.resolve(tenant, handleID); err == nil && backend.IsolationOf(spec) == backend.IsolationGVisor {
		return errorf(CodeInvalid, "%q is in the pile (%s), which is read-only under gVisor isolation: nothing in the sandbox can write or append to it, nor create a file there (docs/isolation.md); keep the file in the home directory or /workspace", filePath, guestapi.PileDir)
	}
	if ranged {
		return errorf(CodeInvalid, "%q is, or links to, a file in the pile (%s), which is append-only: write does not write there, not even by append or at an offset, so that only the tenant's own commands grow the pile; append to one of its files with exec (printf '...' >> %s/FILE), or keep the file in the home directory or /workspace", filePath, guestapi.PileDir, guestapi.PileDir)
	}
	return errorf(CodeInvalid, "%q is in the pile (%s), which is append-only: write replaces whole files, which the pile refuses, and only the files already there can grow; append to one with exec (printf '...' >> %s/FILE), or keep the file in the home directory or /workspace", filePath, guestapi.PileDir, guestapi.PileDir)
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
