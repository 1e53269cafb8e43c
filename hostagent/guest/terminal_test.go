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
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// newTerminal opens a terminal of size as a terminal job's holder does.
func newTerminal(t *testing.T, size guestapi.TTYSize) *terminal {
	t.Helper()
	tt, end, err := openTerminal(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tt.close()
		unix.Close(tt.master)
		end.f.Close()
	})
	return tt
}

// feed hands p to the terminal as the holder reads a job's output: a read
// at a time.
func feed(tt *terminal, p []byte) {
	for len(p) > 0 {
		n := min(len(p), 4096)
		tt.output(p[:n])
		p = p[n:]
	}
}

func screenText(s guestapi.Screen) string { return strings.Join(s.Lines, "\n") }

// TestTerminalStringsBounded: a program that sends its terminal a string
// sequence longer than guestapi.MaxTerminalString (the attack: a 2 MB
// window title, after which job_screen never answered, its frame past
// guestapi.MaxFrame) has it dropped whole at the emulator's input, of
// every kind (title, icon name, working directory, hyperlink, clipboard,
// DCS, APC, PM, SOS; ended by BEL, ESC \ or an 8-bit ST): the emulator's
// handlers never see it, the sequence and text after it are the
// emulator's as ever, and the screen's answer stays small. One at the
// bound is handed on whole.
func TestTerminalStringsBounded(t *testing.T) {
	tt := newTerminal(t, guestapi.TTYSize{Rows: 24, Cols: 80})
	// What the emulator's handlers are handed: the length of each string.
	var seen []int
	see := func(data []byte) { seen = append(seen, len(data)) }
	for _, cmd := range []int{0, 1, 2, 7, 8} {
		tt.emu.RegisterOscHandler(cmd, func(data []byte) bool { see(data); return false }) // on to the emulator's own
	}
	tt.emu.RegisterOscHandler(52, func(data []byte) bool { see(data); return true })
	tt.emu.RegisterDcsHandler('q', func(_ ansi.Params, data []byte) bool { see(data); return true })
	tt.emu.RegisterApcHandler(func(data []byte) bool { see(data); return true })
	tt.emu.RegisterPmHandler(func(data []byte) bool { see(data); return true })
	tt.emu.RegisterSosHandler(func(data []byte) bool { see(data); return true })

	// The attack as it was: a 2 MB title, and the screen asked for.
	feed(tt, []byte("\x1b]0;"+strings.Repeat("t", 2<<20)+"\a$ "))
	scr := tt.screen(0)
	if f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameScreenState, scr); err != nil || len(f) > 16<<10 || scr.Title != "" || seen != nil {
		t.Fatalf("after a 2 MB title the screen's answer is %d bytes, %v, with a title of %d bytes (the handlers saw %v); want a small one, no title", len(f), err, len(scr.Title), seen)
	}

	const limit = guestapi.MaxTerminalString
	for _, tc := range []struct {
		name       string
		start, end string // around the string's data
		prefix     string // of the string, before the data (an OSC's number)
		title      bool   // sets the title
	}{
		{"title, BEL", "\x1b]", "\a", "2;", true},
		{"title and icon name, ESC \\", "\x1b]", "\x1b\\", "0;", true},
		{"icon name, 8-bit ST", "\x1b]", "\x9c", "1;", false},
		{"title, 8-bit OSC", "\x9d", "\a", "2;", true},
		{"working directory", "\x1b]", "\a", "7;file://host/", false},
		{"hyperlink", "\x1b]", "\x1b\\", "8;;https://example.test/", false},
		{"clipboard", "\x1b]", "\a", "52;c;", false},
		{"DCS", "\x1bPq", "\x1b\\", "", false},
		{"APC", "\x1b_", "\x1b\\", "", false},
		{"PM", "\x1b^", "\x1b\\", "", false},
		{"SOS, 8-bit ST", "\x1bX", "\x9c", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := func(n int) string {
				return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'x'}, n))[:n]
			}
			// Over the bound: 2 MB, then a title and text of the usual size.
			seen = nil
			feed(tt, []byte(tc.start+tc.prefix+data(2<<20)+tc.end+"\x1b]2;after\a\r\nafter "+tc.name))
			scr := tt.screen(0)
			if !slices.Equal(seen, []int{len("2;after")}) || scr.Title != "after" || !strings.Contains(screenText(scr), "after "+tc.name) {
				t.Fatalf("over the bound: the handlers saw strings of %v bytes; want only the %d of the title after it; title %.40q; screen:\n%s", seen, len("2;after"), scr.Title, screenText(scr))
			}
			f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameScreenState, scr)
			if err != nil || len(f) > 16<<10 {
				t.Errorf("the screen's answer: %d bytes, %v; want a small one", len(f), err)
			}
			// At the bound: handed on whole.
			seen = nil
			d := data(limit - len(tc.prefix))
			feed(tt, []byte(tc.start+tc.prefix+d+tc.end))
			if !slices.Equal(seen, []int{limit}) {
				t.Errorf("at the bound: the handlers saw strings of %v bytes; want one of %d", seen, limit)
			}
			if got := tt.screen(0).Title; tc.title && got != d {
				t.Errorf("at the bound: title of %d bytes; want the %d sent", len(got), len(d))
			}
		})
	}
}

// TestScreenAnswerFits: a screen and scrollback full of what JSON
// escapes six-fold ("<" as \u003c) still make one answer: the lines past
// the budget are cut, not the answer lost (the frame too large, and the
// agent left waiting).
func TestScreenAnswerFits(t *testing.T) {
	size := guestapi.TTYSize{Rows: bounds.MaxTTYRows, Cols: bounds.MaxTTYCols, Scrollback: bounds.MaxScrollback}
	tt := newTerminal(t, size)
	line := strings.Repeat("<", size.Cols-1) + "\r\n"
	feed(tt, []byte(strings.Repeat(line, 2*size.Rows+2000)))
	scr := tt.screen(bounds.MaxScrollback)
	f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameScreenState, scr)
	if err != nil {
		t.Fatalf("the screen's answer: %v", err)
	}
	if len(f) > guestapi.MaxFrame {
		t.Fatalf("the screen's answer is %d bytes, over a frame", len(f))
	}
	if len(scr.Lines) != size.Rows || len(scr.Scrollback) == 0 {
		t.Errorf("%d lines and %d of scrollback; want %d and some", len(scr.Lines), len(scr.Scrollback), size.Rows)
	}
	// The budget counts what JSON escapes: every line of the screen is
	// whole (600 kB of JSON), and the scrollback takes what is left.
	for i, l := range scr.Lines {
		if want := strings.Repeat("<", size.Cols-1); i < len(scr.Lines)-1 && l != want {
			t.Fatalf("line %d is %d bytes; want %d", i, len(l), len(want))
		}
	}
	if b, _ := json.Marshal(slices.Concat(scr.Lines, scr.Scrollback)); len(b) > maxScreenText+2 {
		t.Errorf("lines of %d JSON bytes, over the budget of %d", len(b), maxScreenText)
	}
}

// TestStringBoundKeepsTheRest: output without long strings reaches the
// emulator byte for byte.
func TestStringBoundKeepsTheRest(t *testing.T) {
	b := newStringBound(guestapi.MaxTerminalString)
	r := rand.New(rand.NewPCG(1, 2))
	for range 64 {
		in := make([]byte, 4096)
		for i := range in {
			in[i] = byte(r.IntN(256))
		}
		// Strings cut short, as a CAN does, so that none is long.
		for i := 0; i < len(in); i += 1000 {
			in[i] = ansi.CAN
		}
		if out := b.filter(in); !bytes.Equal(out, in) {
			t.Fatalf("the bound changed output without a long string:\n%q\n%q", in, out)
		}
	}
	text := "$ top\r\n\x1b[?1049h\x1b[1;1Htop - 10:00\x1b]0;top\a\x1b[K\x1bP$q\"p\x1b\\é漢字\r\n"
	if out := b.filter([]byte(text)); string(out) != text {
		t.Errorf("filter(%q) = %q", text, out)
	}
}

// FuzzStringBound: whatever a program writes, cut wherever the holder's
// reads cut it, no string longer than the bound reaches a parser of the
// emulator's kind fed through the bound, and the two parsers are in the
// same state whenever the bound is not dropping a string.
func FuzzStringBound(f *testing.F) {
	f.Add([]byte("\x1b]2;a long title\a\x1b]0;t\x1b\\text"), uint8(3))
	f.Add([]byte("\x1bPqdata data\x9c\x9d2;osc\x07\x1b_apc\x98sos\x9c"), uint8(1))
	f.Add([]byte("\x1b^pm string\x18\x1bXsos \xc3\xa9 string\x1b\\\x90q\x1b[1m"), uint8(7))
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		const limit = 4
		b := newStringBound(limit)
		emu := ansi.NewParser()
		emu.SetDataSize(0) // unbounded: whatever it is handed, it hands on
		longest := 0
		see := func(data []byte) { longest = max(longest, len(data)) }
		emu.SetHandler(ansi.Handler{
			HandleOsc: func(_ int, data []byte) { see(data) },
			HandleDcs: func(_ ansi.Cmd, _ ansi.Params, data []byte) { see(data) },
			HandleSos: see, HandlePm: see, HandleApc: see,
		})
		step := int(cut)%64 + 1
		for i := 0; i < len(in); i += step {
			for _, c := range b.filter(in[i:min(i+step, len(in))]) {
				emu.Advance(c)
			}
			if longest > limit {
				t.Fatalf("a string of %d bytes reached the emulator, over %d", longest, limit)
			}
			if !b.drop && emu.State() != b.p.State() {
				t.Fatalf("after %d bytes the emulator is in %s, the bound in %s", min(i+step, len(in)), emu.StateName(), b.p.StateName())
			}
		}
	})
}
