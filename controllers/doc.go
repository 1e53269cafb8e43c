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

// Package controllers holds the manager's reconcilers: Tenant (credentials and
// the tenant's Sandbox), Sandbox (binding to a node) and FacultyBundle (the
// source's fingerprint and a summary of the agents' builds). WorkerMapping
// has no reconciler yet; see the README's "What runs yet".
package controllers
