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
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// inputSchema derives In's schema and applies refine to its properties, so
// that a model sees the enums, defaults and bounds the handlers enforce.
func inputSchema[In any](refine func(props propMap)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema of %T: %v", *new(In), err))
	}
	if refine != nil {
		refine(s.Properties)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// propMap is a schema's properties.
type propMap = map[string]*jsonschema.Schema

// Refinements shared by several tools.
func refineHandle(p propMap) {
	p["handle"].MinLength = ptr(1)
	p["handle"].MaxLength = ptr(maxIDLength)
}

func refineJobID(p propMap) {
	p["job_id"].MinLength = ptr(1)
	p["job_id"].MaxLength = ptr(maxIDLength)
}

func refineCommand(p propMap, defaultTimeout int, maxTimeout int) {
	refineHandle(p)
	p["command"].MinLength = ptr(1)
	p["shell"].Enum = []any{"login", "clean"}
	p["shell"].Default = []byte(`"login"`)
	p["timeout_seconds"].Minimum = ptr(0.0)
	p["timeout_seconds"].Maximum = ptr(float64(maxTimeout))
	if defaultTimeout > 0 {
		p["timeout_seconds"].Default = fmt.Appendf(nil, "%d", defaultTimeout)
	}
}

// refineKey bounds an idempotency key (agentapi.CheckIdempotencyKey).
func refineKey(p propMap) {
	p["idempotency_key"].MinLength = ptr(1)
	p["idempotency_key"].MaxLength = ptr(agentapi.MaxIdempotencyKeyBytes)
	p["idempotency_key"].Pattern = "^[A-Za-z0-9._:-]+$"
}

func refinePath(p propMap) {
	refineHandle(p)
	p["path"].MinLength = ptr(1)
	p["path"].MaxLength = ptr(4096)
}

// outputSchema derives Out's schema and applies refine.
func outputSchema[Out any](refine func(props propMap)) *jsonschema.Schema {
	s, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema of %T: %v", *new(Out), err))
	}
	if refine != nil {
		refine(s.Properties)
	}
	return s
}

func refineEncodings(names ...string) func(propMap) {
	return func(p propMap) {
		for _, n := range names {
			p[n].Enum = []any{encodingText, encodingBase64}
		}
	}
}
