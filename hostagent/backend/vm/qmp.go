//go:build linux

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

package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a connection to QEMU's control socket (the QEMU Machine Protocol:
// one JSON object per line; a command's answer is the next line with
// "return" or "error", events come in between).
type qmp struct {
	c    *net.UnixConn
	r    *bufio.Reader
	stop func() bool
}

// maxQMPLine bounds a line QEMU sends (its answers here are small).
const maxQMPLine = 1 << 20

// dialQMP connects to the VM's control socket and leaves its greeting
// behind (capabilities negotiated). ctx bounds the whole connection.
func (v *VM) dialQMP(ctx context.Context) (*qmp, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(v.cfg.Dir, qmpSocket))
	if err != nil {
		return nil, fmt.Errorf("vm: connecting to qemu's control socket: %w", err)
	}
	q := &qmp{c: c.(*net.UnixConn), r: bufio.NewReaderSize(c, 64<<10)}
	if deadline, ok := ctx.Deadline(); ok {
		_ = q.c.SetDeadline(deadline)
	}
	// A cancel ends what waits on the connection.
	q.stop = context.AfterFunc(ctx, func() { _ = q.c.SetDeadline(time.Unix(1, 0)) })
	if _, err := q.line(); err != nil { // {"QMP": {...}}
		q.Close()
		return nil, fmt.Errorf("vm: reading qemu's greeting: %w", err)
	}
	if _, err := q.execute("qmp_capabilities", nil); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) Close() error {
	q.stop()
	return q.c.Close()
}

// line reads one line of QEMU's.
func (q *qmp) line() ([]byte, error) {
	var out []byte
	for {
		chunk, isPrefix, err := q.r.ReadLine()
		if err != nil {
			return nil, err
		}
		out = append(out, chunk...)
		if len(out) > maxQMPLine {
			return nil, errors.New("vm: qemu sent a line of over 1 MiB")
		}
		if !isPrefix {
			return out, nil
		}
	}
}

// execute runs one command, passing fds with it (SCM_RIGHTS), and returns
// its "return" value.
func (q *qmp) execute(cmd string, args any, fds ...int) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := q.c.WriteMsgUnix(append(data, '\n'), oob, nil); err != nil {
		return nil, fmt.Errorf("vm: qemu command %s: %w", cmd, err)
	}
	for {
		line, err := q.line()
		if err != nil {
			return nil, fmt.Errorf("vm: qemu command %s: %w", cmd, err)
		}
		var ans struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &ans); err != nil {
			return nil, fmt.Errorf("vm: qemu command %s: %w", cmd, err)
		}
		switch {
		case ans.Error != nil:
			return nil, fmt.Errorf("vm: qemu command %s: %s: %s", cmd, ans.Error.Class, ans.Error.Desc)
		case ans.Return != nil:
			return ans.Return, nil
		}
		// An event: the answer comes later.
	}
}
