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

// Package adversarial holds attacks on a Playground installation by the
// actors of the multi-team model (docs/security.md, "Who may do what"): a
// team that may create objects in its namespace, and the root of one node
// (its agent's identity). They run against a real kube-apiserver with the
// installation's admission policies in force.
//
// Attacks whose target is a component's own code live beside that code, so
// that they run with its real parts; docs/security.md ("Attacks kept as
// tests") lists every one and where its test is. A new attack found later
// becomes a new test, here or there, and a line of that list.
package adversarial
