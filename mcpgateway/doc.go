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

// Package mcpgateway is the MCP gateway: it authenticates MCP clients by
// their tenant's bearer token (against the token hashes the manager
// publishes in the Tenants' status, from informers; it reads no tenant's
// Secret, only the manager's copies of workers' bearers; see clusterview), resolves tenant, Sandbox and node from the
// same informer caches, and serves each tenant the catalog its Tenant
// names: the eight sandbox tools (see tools) through the node's host
// agent, or, for the workers catalog, its own worker's, forwarded to the
// destination of its WorkerMapping (see workers). It serves Streamable
// HTTP at /mcp, stateless by default so that any replica serves any
// request, or one tenant of the sandbox catalog over stdio authorised by
// the caller's kubeconfig. It refuses every request while it cannot trust
// its view of credentials (fail closed). docs/tools.md and docs/workers.md
// are the reference.
package mcpgateway
