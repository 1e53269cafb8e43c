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
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// File transfer runs inside the sandbox, in a clean shell as the tenant's
// user, so that paths resolve exactly as the tenant's commands see them
// (symlinks included) and no host path is ever touched. The exit codes
// below are the scripts' own, outside the range the utilities they call use.
const (
	exitNoFile     = 66
	exitNotRegular = 67
	exitTooLarge   = 68
	exitNoDir      = 69
	exitIsDir      = 70
	exitInPile     = 71
)

// FileContent is a file read from a sandbox.
type FileContent struct {
	Path   string
	Data   []byte
	Size   int
	MIME   string
	SHA256 string
}

// FileInfo describes a file written to a sandbox.
type FileInfo struct {
	Path   string
	Size   int
	MIME   string
	SHA256 string
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
	res, err := a.Exec(ctx, tenant, handleID, ExecRequest{Command: script, Shell: backend.ShellClean, Cwd: cwd})
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
	sum := sha256.Sum256(res.Stdout)
	return FileContent{
		Path:   abs,
		Data:   res.Stdout,
		Size:   len(res.Stdout),
		MIME:   DetectMIME(filePath, res.Stdout),
		SHA256: hex.EncodeToString(sum[:]),
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
	res, err := a.Exec(ctx, tenant, handleID, ExecRequest{Command: script, Shell: backend.ShellClean, Cwd: cwd, Stdin: data})
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
		return FileInfo{}, a.pileRefusal(tenant, handleID, filePath)
	default:
		return FileInfo{}, errorf(CodeInvalid, "writing %q failed (exit %d), the file is unchanged: %s", filePath, res.ExitCode, stderr)
	}
	sum := sha256.Sum256(data)
	return FileInfo{
		Path:   string(res.Stdout),
		Size:   len(data),
		MIME:   DetectMIME(filePath, data),
		SHA256: hex.EncodeToString(sum[:]),
	}, nil
}

// pileRefusal says why write cannot write filePath, in the pile: write
// replaces files, which the pile refuses (its files are append-only and
// its directory the sandbox root's); under gVisor nothing reaches it.
func (a *Agent) pileRefusal(tenant, handleID, filePath string) error {
	if spec, _, err := a.resolve(tenant, handleID); err == nil && backend.IsolationOf(spec) == backend.IsolationGVisor {
		return errorf(CodeInvalid, "%q is in the pile (%s), which is read-only under gVisor isolation: nothing in the sandbox can write or append to it, nor create a file there (docs/isolation.md); keep the file in the home directory or /workspace", filePath, guestapi.PileDir)
	}
	return errorf(CodeInvalid, "%q is in the pile (%s), which is append-only: write replaces whole files, which the pile refuses, and only the files already there can grow; append to one with exec (printf '...' >> %s/FILE), or keep the file in the home directory or /workspace", filePath, guestapi.PileDir, guestapi.PileDir)
}

// DetectMIME names a file's media type from its extension, else its content.
func DetectMIME(name string, data []byte) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}
