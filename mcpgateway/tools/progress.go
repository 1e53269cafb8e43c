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

package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/util/wait"
)

// withProgress sends a progress notification every interval while h runs,
// when the request carries a progress token, so that a client with a fixed
// call timeout that resets on progress keeps waiting for a long exec or
// poll. The notifications go out on the request's own response stream,
// which works in stateless mode too.
func withProgress[In, Out any](tool string, interval time.Duration, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		if req != nil && req.Session != nil && req.Params != nil {
			if token := req.Params.GetProgressToken(); token != nil {
				stop := heartbeat(ctx, req.Session, token, tool, interval)
				defer stop()
			}
		}
		return h(ctx, req, in)
	}
}

// endsWithCarrier ends h's context when the request that carries the call
// ends (carrier): a client that has gone takes no result, so what the
// call runs (a command, a file operation in the sandbox) is killed rather
// than left to run to its end.
func endsWithCarrier[In, Out any](carrier func(*mcp.CallToolRequest) context.Context, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	if carrier == nil {
		return h
	}
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		if c := carrier(req); c != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(c, cancel)()
		}
		return h(ctx, req, in)
	}
}

// heartbeat runs the notifications until the returned stop is called; stop
// waits for the goroutine to end, so no notification follows the result.
func heartbeat(ctx context.Context, ss *mcp.ServerSession, token any, tool string, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		start := time.Now()
		n := 0
		// Never done: the poll ends with ctx (the request's, or stop).
		_ = wait.PollUntilContextCancel(ctx, interval, false, func(ctx context.Context) (bool, error) {
			n++
			elapsed := time.Since(start).Truncate(time.Second)
			// Progress must increase; the total is unknown.
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(n),
				Message:       fmt.Sprintf("%s still running after %s", tool, elapsed),
			})
			return false, nil
		})
	}()
	return func() {
		cancel()
		<-exited
	}
}
