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
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// agentFD is a holder's connection to the agent: its standard input, one
// end of a socket pair whose other end the agent keeps.
const agentFD = 0

// RunHold is `playground-sandbox hold` (guestapi.HoldMode): a job's holder
// started for that one job, where no init keeps shepherds ready (a jail,
// started by jexec as the jail's root). It becomes a subreaper, reads the
// job's start request on its standard input as a shepherd reads one on
// its connection, and holds the job exactly as a shepherd of init does
// (holdJob): the job's ring in its memory, its socket and record in the
// run directory's "jobs", the kill with proof, and the job outliving the
// connection and the agent until it is released or expires.
//
// With -attach ID it connects to job ID's socket instead and hands that
// connection to the agent over its standard input (SCM_RIGHTS), then
// exits: the agent reaches a job again with no process of the sandbox
// left between them.
//
// -run, -home, -uid and -gid default to the guest layout's (RunDir,
// TenantHome, TenantUID, TenantGID); a holder run outside a jail, by a
// test of the jail backend, is told where those are.
func RunHold(args []string) int {
	fs := flag.NewFlagSet(guestapi.HoldMode, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := fs.String("run", guestapi.RunDir, "the sandbox's run directory")
	home := fs.String("home", guestapi.TenantHome, "the sandbox user's home")
	uid := fs.Uint("uid", guestapi.TenantUID, "the sandbox user")
	gid := fs.Uint("gid", guestapi.TenantGID, "the sandbox user's group")
	attach := fs.String(guestapi.HoldAttachFlag[1:], "", "the job to hand a connection to")
	// The tenant's shell inherits none of the holder's descriptors.
	for fd := range 3 {
		unix.CloseOnExec(fd)
	}
	s := &shepherd{conn: agentFD, drainTo: -1}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *uid == 0 || *uid > 1<<31 || *gid > 1<<31 {
		s.sendError(fmt.Sprintf("usage: playground-sandbox %s [-run DIR] [-home DIR] [-uid N -gid N] [%s JOB]", guestapi.HoldMode, guestapi.HoldAttachFlag))
		return 2
	}
	tenantHome, tenantUID, tenantGID = *home, uint32(*uid), uint32(*gid)
	// The holder works in its jobs directory, so that a socket's path is
	// short whatever the directory's (at most 104 bytes on FreeBSD).
	dir := filepath.Join(*run, "jobs")
	if *attach == "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			s.sendError(fmt.Sprintf("the jobs directory: %v", err))
			return 1
		}
	}
	if err := os.Chdir(dir); err != nil {
		s.sendError(fmt.Sprintf("no job %s in this sandbox: %v", *attach, err))
		return 1
	}
	jobsDir = "."
	if *attach != "" {
		return handOver(s, *attach)
	}
	if err := becomeSubreaper(); err != nil {
		s.sendError(err.Error())
		return 1
	}
	req, stdin, err := s.readRequest()
	switch {
	case err != nil:
		s.sendError(err.Error())
		return 1
	case req.Job == nil:
		s.sendError("protocol error: a holder takes a job's start request only")
		return 1
	}
	s.startJob(req, stdin)
	return 0
}

// handOver connects to job id's socket and sends the connection to the
// agent with a Started frame; or an Error frame saying why not.
func handOver(s *shepherd, id string) int {
	if !validJobID(id) {
		s.sendError(fmt.Sprintf("job ID %q is malformed", id))
		return 1
	}
	c, err := dialBounded("unix", filepath.Join(jobsDir, id+".sock"))
	if err != nil {
		s.sendError(fmt.Sprintf("no job %s in this sandbox: it ended and was released, or the sandbox restarted", id))
		return 1
	}
	defer c.Close()
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		s.sendError(fmt.Sprintf("handing over the job's connection: %v", err))
		return 1
	}
	defer f.Close()
	started := guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":0}`))
	if err := unix.Sendmsg(agentFD, started, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox hold: handing over the job's connection: %v\n", err)
		return 1
	}
	return 0
}
