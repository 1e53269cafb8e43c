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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// connectSet serves the standard or the extended set over the SDK's
// in-memory transport and returns a client session of it.
func connectSet(t *testing.T, extended bool) *mcp.ClientSession {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	Register(server, Options{Router: agentRouter{&fakeAgent{}}, ProgressInterval: time.Hour, Extended: extended})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs
}

func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestStandardSetNamesTheExtendedOne: a tenant of the standard set that
// calls a tool of the extended set (a client that knows of job_screen)
// gets a tool error that names the setting which serves it, not the
// protocol's "unknown tool"; for every tool the extended set adds.
func TestStandardSetNamesTheExtendedOne(t *testing.T) {
	standard, extended := connectSet(t, false), connectSet(t, true)
	added := slices.DeleteFunc(listed(t, extended), func(n string) bool { return slices.Contains(listed(t, standard), n) })
	if want := slices.Sorted(slices.Values(ExtendedNames)); !slices.Equal(added, want) {
		t.Fatalf("the extended set adds %v to the standard one; ExtendedNames says %v: keep them one list", added, want)
	}
	for _, name := range ExtendedNames {
		res, err := standard.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"job_id": "job-1"}})
		if err != nil {
			t.Fatalf("%s in the standard set: a protocol error (%v), want a tool error that says how to get it", name, err)
		}
		text := textOf(res)
		if !res.IsError || !strings.HasPrefix(text, string(agentapi.CodeForbidden)+": "+name+" is a tool of the extended tool set") || !strings.Contains(text, "spec.tools: extended") {
			t.Fatalf("%s in the standard set answered %q", name, text)
		}
	}
}
