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

// Package bounds holds the bounds of one call that more than one side
// checks: the gateway before a call travels, the agent where it enters,
// the guest in the sandbox at the end of the guest protocol. Each is
// defined here once, and every side imports it; so that the guest binary
// may, the package imports nothing of this module.
package bounds

import (
	"fmt"
	"time"
)

// Bounds of a command.
const (
	// MaxCommandBytes bounds the text of one command, everywhere. Every
	// backend runs a command as one argument of /bin/sh -c, and Linux
	// refuses an argument of more than MAX_ARG_STRLEN bytes (32 pages,
	// 131072, with its terminating NUL) with E2BIG; a longer limit would
	// only move the failure into the sandbox, with a worse message.
	MaxCommandBytes = 128<<10 - 1
	// MaxTimeout bounds the timeout of one command or job.
	MaxTimeout = 24 * time.Hour
)

// CommandTooLong is the one message for a command over MaxCommandBytes.
func CommandTooLong(n int) string {
	return fmt.Sprintf("command is %d bytes, over the %d-byte limit (the kernel's bound on one argument of /bin/sh -c): write the script to a file with write, then run it (sh /path/to/script)", n, MaxCommandBytes)
}

// Bounds of a terminal job and of a job's input.
const (
	MaxTTYRows = 200
	MaxTTYCols = 500
	// MaxScrollback bounds the lines of scrollback a terminal keeps, and
	// a screen read returns.
	MaxScrollback = 10000
	// MaxInputBytes bounds the input of one input call, and of one Input
	// frame of the guest protocol.
	MaxInputBytes = 64 << 10
)

// CheckTTY refuses a terminal's size or scrollback out of bounds, saying
// which.
func CheckTTY(rows, cols, scrollback int) error {
	switch {
	case rows < 1 || rows > MaxTTYRows:
		return fmt.Errorf("rows %d is out of range: give 1 to %d", rows, MaxTTYRows)
	case cols < 1 || cols > MaxTTYCols:
		return fmt.Errorf("cols %d is out of range: give 1 to %d", cols, MaxTTYCols)
	}
	return CheckScrollback(scrollback)
}

// CheckScrollback refuses a scrollback out of 0 to MaxScrollback lines.
func CheckScrollback(lines int) error {
	if lines < 0 || lines > MaxScrollback {
		return fmt.Errorf("scrollback %d is out of range: give 0 to %d lines", lines, MaxScrollback)
	}
	return nil
}

// Bounds of a job's poll.
const (
	// MaxPollWait bounds how long a poll waits for output.
	MaxPollWait = 30 * time.Second
	// MaxPollBytes bounds the output bytes of one poll's page.
	MaxPollBytes = 4 << 20
)

// MaxFileBytes bounds the bytes of one read or write: a whole file, or one
// range of a larger one. Larger files are refused, never truncated.
const MaxFileBytes = 3 << 20
