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

	uv "github.com/charmbracelet/ultraviolet"
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

// maxScreenText bounds the text of a Screen answer's scrollback, so that
// the answer stays well inside a frame; the latest lines are kept.
const maxScreenText = guestapi.MaxFrame / 2

// terminal is a terminal job's pseudo-terminal, seen from the holder: its
// master side, which the holder reads (the job's output, to the ring and
// to the emulator) and writes (the job's input), and an emulator that
// keeps its screen as a terminal would show it. The emulator lives in the
// holder, in the sandbox's memory, so the screen outlives every agent.
type terminal struct {
	master int // the holder's end, non-blocking
	emu    *vt.Emulator
	size   guestapi.TTYSize
	title  string
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
	t := &terminal{master: master, size: size, replies: replies, emu: vt.NewEmulator(size.Cols, size.Rows)}
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

// output feeds the job's output to the emulator.
func (t *terminal) output(p []byte) {
	_, _ = t.emu.Write(p)
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
		s.Lines[y] = strings.TrimRight(line.String(), " ")
	}
	if sb := e.Scrollback(); sb != nil && scrollback > 0 {
		n := sb.Len()
		budget := maxScreenText
		var lines []string
		for i := n - 1; i >= 0 && len(lines) < scrollback; i-- {
			l := strings.TrimRight(sb.Line(i).String(), " ")
			if budget -= len(l) + 8; budget < 0 {
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

// errNotTerminal refuses a terminal's request of a job without one.
var errNotTerminal = errors.New("the job has no terminal: start it with a tty to resize it or read its screen")
