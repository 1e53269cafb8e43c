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

// Package mcpclient is a tenant's MCP client of the gateway, as an agent's
// client connects (go-sdk over Streamable HTTP, the tenant's bearer token
// on every request): what the benchmarks and the soak call the tools with.
package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bearer adds a tenant's token to every request.
type Bearer struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Base.RoundTrip(r)
}

// Connect opens an MCP session with the gateway at endpoint as the tenant
// whose token it is, over base (http.DefaultTransport when nil); name is
// the client's implementation name.
func Connect(ctx context.Context, endpoint, token string, base http.RoundTripper, name string) (*mcp.ClientSession, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: Bearer{Token: token, Base: base}},
	}, nil)
}

// ToolError is a tool's failure: a result with isError, whose text is
// `<code>: <message>` (docs/tools.md).
type ToolError struct {
	Tool, Code, Text string
}

func (e *ToolError) Error() string { return e.Tool + ": " + e.Text }

// Call runs a tool and decodes its structured result into out (if not
// nil). A tool's failure is a *ToolError; any other error is the
// transport's or the protocol's.
func Call(ctx context.Context, cs *mcp.ClientSession, name string, args, out any) error {
	_, err := CallResult(ctx, cs, name, args, out)
	return err
}

// CallResult is Call, also returning the result itself (its content
// blocks), when the call succeeded.
func CallResult(ctx context.Context, cs *mcp.ClientSession, name string, args, out any) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, t.Text)
			}
		}
		text := strings.Join(msg, "; ")
		code, _, _ := strings.Cut(text, ":")
		return nil, &ToolError{Tool: name, Code: code, Text: text}
	}
	if out == nil {
		return res, nil
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	return res, json.Unmarshal(raw, out)
}
