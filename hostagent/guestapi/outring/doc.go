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

// Package outring keeps a job's output: a window of bounded bytes and
// chunks on everything the job wrote, addressed by cursors that stay
// meaningful after eviction, read in pages that never split a character,
// with the gap a slow reader missed counted exactly. A sandbox's job
// holder keeps one per held job, and the agent's job manager one per job
// it keeps itself; the guest protocol carries its cursors (as text) and
// its gaps. It depends on nothing but the protocol's stream names.
package outring
