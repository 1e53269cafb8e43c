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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// ShellFiles serves file calls as shell scripts that be's Exec runs in a
// clean shell as the tenant, for a backend whose sandboxes run no guest
// that serves them (the jail's; Lima's, reached through a forwarded
// socket and tested against a fake guest only). A path resolves exactly
// as the tenant's commands see it, and no host path is touched. The
// scripts need only POSIX sh and utilities (and sha256sum or sha256 for a
// digest).
func ShellFiles(be Backend) FileServer { return shellFiles{be: be} }

type shellFiles struct{ be Backend }

// The scripts' exit codes, outside the range the utilities they call use.
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

// shellRefusals are the refusals the scripts' exit codes say.
var shellRefusals = map[int]filecall.Refusal{
	exitNoFile: filecall.NoFile, exitNotRegular: filecall.NotRegular, exitTooLarge: filecall.TooLarge, exitNoDir: filecall.NoDir,
	exitIsDir: filecall.IsDir, exitInPile: filecall.InPile, exitNoDigest: filecall.NoDigest, exitChanged: filecall.Changed,
}

// maxShellAnswer bounds what a script prints besides a read's bytes: a
// size, a digest, a path.
const maxShellAnswer = 2*guestapi.MaxFilePath + 256

func (s shellFiles) File(ctx context.Context, id string, call FileCall) (FileResult, error) {
	f := ShellQuote(call.Path)
	switch call.Op {
	case filecall.Read:
		if call.Whole {
			return s.read(ctx, id, call, f)
		}
		return s.readRange(ctx, id, call, f)
	case filecall.Digest:
		return s.digest(ctx, id, call, f)
	case filecall.Write:
		return s.write(ctx, id, call, f)
	case filecall.WriteAt, filecall.Append:
		return s.writeRange(ctx, id, call, f)
	}
	return FileResult{}, fmt.Errorf("%w: unknown file call %q", ErrInvalidRequest, call.Op)
}

func (s shellFiles) read(ctx context.Context, id string, call FileCall, f string) (FileResult, error) {
	script := fmt.Sprintf(`f=%s
[ -e "$f" ] || exit %d
[ -f "$f" ] || exit %d
s=$(wc -c < "$f") || exit 1
[ "$s" -le %d ] || { echo "$s" >&2; exit %d; }
printf '%%s/%%s' "$(cd -- "$(dirname -- "$f")" 2>/dev/null && pwd -P)" "$(basename -- "$f")" >&2
exec cat -- "$f"`, f, exitNoFile, exitNotRegular, call.Length, exitTooLarge)
	out, err := s.run(ctx, id, call, script, call.Length+1)
	if err != nil {
		return FileResult{}, err
	}
	if len(out.stdout) > call.Length {
		return FileResult{}, &FileRefused{Why: filecall.Grew}
	}
	return FileResult{Path: absOr(string(out.stderr), call.Path), Data: out.stdout, Size: int64(len(out.stdout))}, nil
}

func (s shellFiles) readRange(ctx context.Context, id string, call FileCall, f string) (FileResult, error) {
	// tail -c +N seeks on a regular file (GNU, FreeBSD), so a range deep
	// in a large file costs what its own bytes cost.
	script := fmt.Sprintf(`f=%s
[ -e "$f" ] || exit %d
[ -f "$f" ] || exit %d
s=$(wc -c < "$f") || exit 1
printf '%%s\n%%s/%%s' "$s" "$(cd -- "$(dirname -- "$f")" 2>/dev/null && pwd -P)" "$(basename -- "$f")" >&2
[ "$s" -gt %d ] || exit 0
tail -c +%d -- "$f" | head -c %d`, f, exitNoFile, exitNotRegular, call.Offset, uint64(call.Offset)+1, call.Length)
	out, err := s.run(ctx, id, call, script, call.Length)
	if err != nil {
		return FileResult{}, err
	}
	size, abs, ok := sizeAndPath(string(out.stderr))
	if !ok {
		return FileResult{}, fmt.Errorf("the sandbox did not say the file's size: %q", out.stderr)
	}
	end := call.Offset + int64(len(out.stdout))
	if len(out.stdout) < call.Length && end < size {
		return FileResult{}, &FileRefused{Why: filecall.Short, Detail: fmt.Sprintf("%d of its %d", end, size)}
	}
	if len(out.stdout) > 0 {
		size = max(size, end) // it grew while it was read
	}
	return FileResult{Path: absOr(abs, call.Path), Data: out.stdout, Size: size}, nil
}

func (s shellFiles) digest(ctx context.Context, id string, call FileCall, f string) (FileResult, error) {
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
		f, exitNoFile, exitNotRegular, exitNoDigest, exitChanged)
	out, err := s.run(ctx, id, call, script, maxShellAnswer)
	if err != nil {
		return FileResult{}, err
	}
	sum, rest, _ := strings.Cut(string(out.stdout), "\n")
	size, abs, ok := sizeAndPath(rest)
	if b, err := hex.DecodeString(sum); !ok || err != nil || len(b) != sha256.Size {
		return FileResult{}, fmt.Errorf("the sandbox answered no size and sha256: %q", out.stdout)
	}
	return FileResult{Path: absOr(abs, call.Path), Size: size, SHA256: strings.ToLower(sum)}, nil
}

func (s shellFiles) write(ctx context.Context, id string, call FileCall, f string) (FileResult, error) {
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
printf '%%s/%%s' "$r" "$(basename -- "$f")"`, f, exitNoDir, exitIsDir, guestapi.PileDir, exitInPile)
	out, err := s.run(ctx, id, call, script, maxShellAnswer)
	if err != nil {
		return FileResult{}, err
	}
	return FileResult{Path: absOr(string(out.stdout), call.Path), Size: int64(len(call.Data))}, nil
}

func (s shellFiles) writeRange(ctx context.Context, id string, call FileCall, f string) (FileResult, error) {
	put := `cat >> "$f" || exit 1`
	if call.Op == filecall.WriteAt {
		// The file open read-write, neither truncated nor appended to;
		// dd moves the offset all its descriptors share (an lseek: bs=1
		// costs nothing), and cat writes from there. POSIX dd and sh,
		// unlike GNU dd's oflag=seek_bytes.
		put = fmt.Sprintf(`{ e=$(dd if=/dev/null bs=1 seek=%d conv=notrunc 2>&1 >&3) || { printf '%%s\n' "$e" >&2; exit 1; }
  cat >&3 || exit 1
} 3<> "$f" || exit 1`, call.Offset)
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
		f, exitNoDir, exitIsDir, exitNotRegular, guestapi.PileDir, exitInPile,
		exitNotRegular, guestapi.PileDir, exitInPile, put)
	out, err := s.run(ctx, id, call, script, maxShellAnswer)
	if err != nil {
		return FileResult{}, err
	}
	size, abs, ok := sizeAndPath(string(out.stdout))
	if !ok {
		return FileResult{}, fmt.Errorf("the sandbox did not say the file's size: %q", out.stdout)
	}
	return FileResult{Path: absOr(abs, call.Path), Size: size}, nil
}

// shellOutput keeps up to limit bytes of stdout and maxShellAnswer of
// stderr.
type shellOutput struct {
	limit          int
	stdout, stderr []byte
}

func (o *shellOutput) Write(stream Stream, p []byte) {
	if stream == Stdout {
		o.stdout = append(o.stdout, p[:min(len(p), o.limit-len(o.stdout))]...)
		return
	}
	o.stderr = append(o.stderr, p[:min(len(p), maxShellAnswer-len(o.stderr))]...)
}

// run runs a file call's script and returns its output when it exited 0;
// a refusal its exit code says, or what it said on failing, otherwise.
// When ctx ends, the script and every process it started are killed.
func (s shellFiles) run(ctx context.Context, id string, call FileCall, script string, limit int) (*shellOutput, error) {
	out := &shellOutput{limit: limit}
	proc, err := s.be.Exec(ctx, id, ExecRequest{Command: script, Shell: ShellClean, Cwd: call.Cwd, Stdin: call.Data}, out)
	if err != nil {
		return nil, err
	}
	st, err := proc.Wait(ctx)
	if err != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guestapi.ProofTimeout+5*time.Second)
		defer cancel()
		if kerr := proc.Kill(kctx); kerr != nil {
			return nil, fmt.Errorf("%w (and killing the file call's script: %w)", err, kerr)
		}
		return nil, err
	}
	stderr := strings.TrimSpace(string(out.stderr))
	if st.ExitCode == 0 {
		return out, nil
	}
	if why, ok := shellRefusals[st.ExitCode]; ok {
		return nil, &FileRefused{Why: why, Detail: stderr}
	}
	return nil, fmt.Errorf("%w: exit %d: %s", ErrInvalidRequest, st.ExitCode, stderr)
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
	return size, abs, true
}

// absOr is abs when it is an absolute path on one line, else p.
func absOr(abs, p string) string {
	if !strings.HasPrefix(abs, "/") || strings.ContainsRune(abs, '\n') {
		return p
	}
	return abs
}
