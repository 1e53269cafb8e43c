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

// Command probe is what the conformance suite runs inside a sandbox to try
// what a shell cannot: system calls of another ABI, and sockets of any
// address family. The suite builds it (static, for the sandbox's
// architecture), writes it into the sandbox with the write tool, and runs it
// as the tenant, so it proves what any tenant program could do.
//
//	probe socket FAMILY…  socket(AF_FAMILY, …) for each FAMILY, a lower-case
//	                      name (unix, inet, vsock…); prints a line "FAMILY ok"
//	                      or "FAMILY" and the errno's name for each
//	probe connect ADDR    a TCP connection to host:port, for at most 5 s;
//	                      prints "connected" or why not
//	probe unshare32       unshare(CLONE_NEWUSER) through i386's ABI (int 0x80)
//	probe unsharex32      unshare(CLONE_NEWUSER) through the x32 ABI
//	probe serve PORT      listens on 127.0.0.1:PORT and answers each HTTP
//	                      request with one line: "probe", the method, the
//	                      path and the Authorization header it got (to a
//	                      path beginning /forge-agent-error, with a 403 and
//	                      the agent's error header, as a hostile worker)
//
// A system call that returns prints "returned" and its result (a negative
// errno). One that seccomp kills takes the calling thread with it (or the
// process, which the shell reports as exit status 159, SIGSYS): the probe
// makes it on a thread of its own and prints "killed" when that thread is
// gone. Whatever the probe cannot try here it answers "unsupported".
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: probe socket FAMILY... | connect HOST:PORT | unshare32 | unsharex32 | serve PORT")
	}
	switch os.Args[1] {
	case "socket":
		for _, family := range os.Args[2:] {
			fmt.Println(family, trySocket(family))
		}
	case "connect":
		if len(os.Args) != 3 {
			fail("usage: probe connect HOST:PORT")
		}
		fmt.Println(connect(os.Args[2]))
	case "unshare32":
		fmt.Println(unshare32())
	case "unsharex32":
		fmt.Println(unsharex32())
	case "serve":
		if len(os.Args) != 3 {
			fail("usage: probe serve PORT")
		}
		fail(serve(os.Args[2]).Error())
	default:
		fail("unknown probe " + strconv.Quote(os.Args[1]))
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "probe:", msg)
	os.Exit(2)
}

// serve answers HTTP/1.1 requests on 127.0.0.1:port, one per connection
// (the net package alone keeps the probe small enough for one write). It
// returns only the error that stopped it.
func serve(port string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var auth string
			for {
				h, err := r.ReadString('\n')
				if err != nil {
					return
				}
				h = strings.TrimRight(h, "\r\n")
				if h == "" {
					break
				}
				if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "Authorization") {
					auth = strings.TrimSpace(v)
				}
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				return
			}
			body := "probe " + f[0] + " " + f[1] + " " + auth + "\n"
			status, extra := "200 OK", ""
			if strings.HasPrefix(f[1], "/forge-agent-error") {
				// A hostile worker's answer dressed as the agent's refusal.
				status, extra = "403 Forbidden", "Playground-Agent-Error: permission_denied\r\n"
			}
			fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Type: text/plain\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, extra, len(body), body)
		}()
	}
}

// connect tries a TCP connection to addr.
func connect(addr string) string {
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return "refused: " + err.Error()
	}
	c.Close()
	return "connected"
}
