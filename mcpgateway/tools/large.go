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
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addLarge registers a tool whose structured result can be megabytes
// (job_poll's pages of up to 4 MiB, exec's 2 × 4 MiB of output). It does
// what mcp.AddTool does with the arguments (validates them against the
// input schema, applies its defaults, reports a mismatch with the same
// message, which guardCalls rewrites), but it leaves the result to be
// encoded once, with the message, and does not validate it against the
// output schema: the SDK (v1.8.0) marshals the result, decodes it again
// into maps, walks it and marshals it once more, which for a 4 MiB page was
// about an eighth of the call's CPU. The tool's tests check its results against the
// output schema instead (TestLargeResultMatchesSchema).
func addLarge[In, Out any](s *mcp.Server, c *catalog, tool *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	schema, ok := tool.InputSchema.(*jsonschema.Schema)
	if !ok || schema == nil {
		panic(fmt.Sprintf("tools: %s: addLarge needs a *jsonschema.Schema input schema", tool.Name))
	}
	input, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("tools: %s: input schema: %v", tool.Name, err))
	}
	if out, ok := tool.OutputSchema.(*jsonschema.Schema); ok {
		// Resolve it as the SDK would, so that a broken schema still fails
		// at registration.
		if _, err := out.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
			panic(fmt.Sprintf("tools: %s: output schema: %v", tool.Name, err))
		}
	}
	// The SDK reads the input schema at every call (its check of the
	// parameter headers, protocol 2026-07-28, marshals it to look for
	// x-mcp-header): given as a *jsonschema.Schema, that encoding cost an
	// exec of `true` some 140 µs of the gateway's CPU, a tenth of it. The
	// same bytes, encoded once here, are what tools/list shows.
	encoded, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("tools: %s: input schema: %v", tool.Name, err))
	}
	registered := *tool
	registered.InputSchema = json.RawMessage(encoded)
	known.Store(tool.Name, true)
	h = withProgress(tool.Name, c.opts.ProgressInterval, endsWithCarrier(c.opts.Carrier, noted(h)))
	s.AddTool(&registered, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var raw json.RawMessage
		if req.Params != nil {
			raw = req.Params.Arguments
		}
		in, err := decodeArguments[In](raw, input)
		if err != nil {
			return errorResult(err), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return errorResult(err), nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		// The output goes into the result as a value, encoded once by the
		// SDK with the rest of the message. Pre-encoded JSON (a
		// json.RawMessage, as the SDK's typed tools put there) would be
		// re-compacted byte by byte twice on its way out (encoding/json's
		// appendCompact: 45% of an 8 MiB exec's CPU in
		// BenchmarkExecHostile), where strings in a struct are copied by
		// encoding/json's fast string path.
		res.StructuredContent = out
		if res.Content == nil {
			structured, err := marshalNoEscape(out)
			if err != nil {
				return nil, fmt.Errorf("marshaling output: %w", err)
			}
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(structured)}}
		}
		return res, nil
	})
}

// decodeArguments is the SDK's treatment of a typed tool's arguments:
// defaults applied, validated against the input schema, then decoded into
// In. Its messages are the SDK's, so that clarifyArguments rewrites them
// alike.
func decodeArguments[In any](raw json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	args := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return in, fmt.Errorf("%sunmarshaling arguments: %w", validationPrefix, err)
		}
	}
	if err := schema.ApplyDefaults(&args); err != nil {
		return in, fmt.Errorf("%sapplying schema defaults:\n%w", validationPrefix, err)
	}
	if err := schema.Validate(&args); err != nil {
		return in, fmt.Errorf("%s%w", validationPrefix, err)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return in, fmt.Errorf("%smarshalling with defaults: %v", validationPrefix, err)
	}
	// The schema admits no unknown properties, so a case-insensitive
	// match of encoding/json cannot pick up a misspelt one.
	if err := json.Unmarshal(b, &in); err != nil {
		return in, err
	}
	return in, nil
}

// marshalNoEscape encodes v as compact JSON without escaping <, > and &
// (as the SDK's JSON-RPC layer does), so that output full of them is not
// inflated sixfold before it travels.
func marshalNoEscape(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// errorResult is a tool error, as the SDK reports one.
func errorResult(err error) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	res.SetError(err)
	return res
}
