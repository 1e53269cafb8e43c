//go:build linux || freebsd

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

package guest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	ansiparser "github.com/charmbracelet/x/ansi/parser"
	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TerminalType is TERM of a terminal job: what the holder's emulator
// understands (an xterm's sequences), and a name whose terminfo entry
// every Debian root has (ncurses-base).
const TerminalType = "xterm-256color"

// DefaultScrollback is the scrollback a terminal keeps when its job's
// start names none.
const DefaultScrollback = 1000

// maxScreenText bounds the text of a Screen answer (its title, lines and
// scrollback, as JSON encodes them), so that the answer fits a frame with
// its other fields: a line past it is cut, and of the scrollback the
// latest lines are kept.
const maxScreenText = guestapi.MaxFrame - 4<<10

// terminal is a terminal job's pseudo-terminal, seen from the holder: its
// master side, which the holder reads (the job's output, to the ring and
// to the emulator) and writes (the job's input), and an emulator that
// keeps its screen as a terminal would show it. The emulator lives in the
// holder, in the sandbox's memory, so the screen outlives every agent.
type terminal struct {
	master int // the holder's end, non-blocking
	emu    *vt.Emulator
	// bound keeps the string sequences on their way to emu short.
	bound *stringBound
	size  guestapi.TTYSize
	title string
	// replies is the holder's own descriptor of the master on which the
	// emulator's answers to the job's queries (cursor position, device
	// attributes) are written, as a terminal's are typed back: from a
	// goroutine, never blocking (an answer the job does not read is
	// dropped), so that a job that asks without reading cannot stall the
	// emulator, and with it the holder.
	replies int
}

// openTerminal opens a pseudo-terminal of size: the holder's master, and
// the job's end, which becomes the job's controlling terminal.
func openTerminal(size guestapi.TTYSize) (*terminal, *terminalEnd, error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	defer m.Close()
	if err := pty.Setsize(m, &pty.Winsize{Rows: uint16(size.Rows), Cols: uint16(size.Cols)}); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("sizing the pseudo-terminal: %w", err)
	}
	// The holder polls raw descriptors: its own duplicates, so that the
	// os.Files (and their finalizers) can go.
	master, err := dupCloexec(int(m.Fd()))
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	replies, err := dupCloexec(master)
	if err != nil {
		unix.Close(master)
		s.Close()
		return nil, nil, err
	}
	_ = unix.SetNonblock(master, true)
	scrollback := size.Scrollback
	if scrollback == 0 {
		scrollback = DefaultScrollback
	}
	t := &terminal{master: master, size: size, replies: replies, emu: vt.NewEmulator(size.Cols, size.Rows), bound: newStringBound(guestapi.MaxTerminalString)}
	t.emu.SetScrollbackSize(scrollback)
	t.emu.SetCallbacks(vt.Callbacks{Title: func(s string) { t.title = s }})
	go t.answer()
	return t, &terminalEnd{s}, nil
}

// terminalEnd is the job's end of a pseudo-terminal, until the job has it.
type terminalEnd struct{ f *os.File }

// fd is the descriptor the job gets (as 0, 1 and 2).
func (e *terminalEnd) fd() uintptr { return e.f.Fd() }

// dupCloexec duplicates fd, close-on-exec in one step.
func dupCloexec(fd int) (int, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("duplicating the pseudo-terminal: %w", err)
	}
	return d, nil
}

// answer writes the emulator's answers to the job's queries back to the
// terminal until the emulator is closed.
func (t *terminal) answer() {
	defer unix.Close(t.replies)
	buf := make([]byte, 256)
	for {
		n, err := t.emu.Read(buf)
		if n > 0 {
			// Non-blocking, as the master is: an answer the job leaves
			// unread past the terminal's buffer is dropped.
			_, _ = unix.Write(t.replies, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// output feeds the job's output to the emulator, each string sequence
// within its bound.
func (t *terminal) output(p []byte) {
	_, _ = t.emu.Write(t.bound.filter(p))
}

// stringBound keeps the string sequences of a terminal's input (OSC: a
// title, an icon name, a working directory, a hyperlink, a clipboard;
// DCS, SOS, PM and APC) within max bytes each, before the emulator, whose
// own parser buffers up to 4 MiB of one and hands it on: a longer one is
// dropped whole, as if it had not been sent. A parser of the emulator's
// kind follows every byte, so that the bound knows which bytes are a
// string's and where each ends, as the emulator does.
type stringBound struct {
	p   *ansi.Parser
	max int
	n   int // bytes of the current string
	// drop: the current string is past max; the emulator had its end
	// (a CAN, which abandons a string unfinished) and gets nothing more
	// of it.
	drop bool
	out  []byte
}

func newStringBound(limit int) *stringBound {
	p := ansi.NewParser()
	p.SetDataSize(1) // it keeps nothing of a string, but its state
	return &stringBound{p: p, max: limit}
}

// inString says whether s is a state in which a parser collects a
// string's bytes.
func inString(s ansiparser.State) bool {
	switch s {
	case ansiparser.OscStringState, ansiparser.DcsStringState, ansiparser.SosStringState, ansiparser.PmStringState, ansiparser.ApcStringState:
		return true
	}
	return false
}

// filter returns in without the bytes of strings past the bound (valid
// until the next call). Every byte it leaves out leaves the emulator's
// parser where it was (a string's byte), or is the rest of a string the
// emulator has abandoned: when the string ends, the byte that ends it
// takes the emulator, in its ground state, where it takes the bound's
// parser (ESC to an escape, BEL, ST, CAN and C1 controls to the ground,
// the start of another string to that string).
func (b *stringBound) filter(in []byte) []byte {
	out := b.out[:0]
	for _, c := range in {
		prev := b.p.State()
		action := b.p.Advance(c)
		next := b.p.State()
		more := inString(prev) && next == prev && action != ansiparser.StartAction
		if b.drop && more {
			continue
		}
		b.drop = false
		if !more {
			b.n = 0 // a new string, or none
		}
		if action == ansiparser.PutAction && inString(next) {
			b.n++
			if b.n > b.max {
				b.drop = true
				out = append(out, ansi.CAN)
				continue
			}
		}
		out = append(out, c)
	}
	// Keep the scratch buffer only while it stays the size of a read.
	if cap(out) <= 64<<10 {
		b.out = out
	}
	return out
}

// resize changes the terminal's size: the kernel's, which signals the
// job's foreground process group (SIGWINCH), and the emulator's.
func (t *terminal) resize(size guestapi.TTYSize) error {
	ws := &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)}
	if err := unix.IoctlSetWinsize(t.master, unix.TIOCSWINSZ, ws); err != nil {
		return fmt.Errorf("resizing the terminal: %w", err)
	}
	t.emu.Resize(size.Cols, size.Rows)
	t.size.Rows, t.size.Cols = size.Rows, size.Cols
	return nil
}

// close ends the emulator's input (its answer goroutine goes); the
// screen stays readable.
func (t *terminal) close() {
	_ = t.emu.Close()
}

// screen renders the terminal as text, with up to scrollback of the
// latest lines that scrolled off its top.
func (t *terminal) screen(scrollback int) guestapi.Screen {
	budget := maxScreenText - jsonLen(t.title)
	e := t.emu
	w, h := e.Width(), e.Height()
	cur := e.CursorPosition()
	s := guestapi.Screen{
		Rows: h, Cols: w,
		Lines:     make([]string, h),
		CursorRow: cur.Y, CursorCol: cur.X,
		CursorHidden:    e.CursorHidden(),
		AltScreen:       e.IsAltScreen(),
		Title:           t.title,
		ScrollbackLines: e.ScrollbackLen(),
	}
	line := make(uv.Line, w)
	for y := range h {
		for x := range w {
			if c := e.CellAt(x, y); c != nil {
				line[x] = *c
			} else {
				line[x] = uv.EmptyCell
			}
		}
		l := cutJSON(strings.TrimRight(line.String(), " "), budget-1)
		budget -= jsonLen(l) + 1
		s.Lines[y] = l
	}
	if sb := e.Scrollback(); sb != nil && scrollback > 0 {
		n := sb.Len()
		var lines []string
		for i := n - 1; i >= 0 && len(lines) < scrollback; i-- {
			l := strings.TrimRight(sb.Line(i).String(), " ")
			if budget -= jsonLen(l) + 1; budget < 0 {
				break
			}
			lines = append(lines, l)
		}
		for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
			lines[i], lines[j] = lines[j], lines[i]
		}
		s.Scrollback = lines
	}
	return s
}

// jsonLen is at least the bytes of s as a JSON string, as encoding/json
// writes it: quoted, "<", ">" and "&" (HTML) and control bytes as \u00XX,
// an invalid byte as \ufffd.
func jsonLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c, size := jsonRune(s[i:])
		n += c
		i += size
	}
	return n
}

// jsonRune is the JSON bytes of s's first character, and its size in s.
func jsonRune(s string) (n, size int) {
	if c := s[0]; c < utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			return 2, 1
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 6, 1
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
		return 6, size
	}
	return size, size
}

// cutJSON is the longest prefix of s, in whole characters, whose jsonLen
// is at most budget ("" when none is).
func cutJSON(s string, budget int) string {
	n := 2
	for i := 0; i < len(s); {
		c, size := jsonRune(s[i:])
		if n += c; n > budget {
			return s[:i]
		}
		i += size
	}
	return s
}

// errNotTerminal refuses a terminal's request of a job without one.
var errNotTerminal = errors.New("the job has no terminal: start it with a tty to resize it or read its screen")
