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

package main

import "github.com/playground-dev/playground/internal/buildinfo"

// version is this build's version, set when it is linked
// (-ldflags "-X main.version=v0.2.0"); empty means the module's version,
// else the commit it was built from.
var version string

// buildVersion says which build this binary is: each role logs it when it
// starts, so that an upgrade can be told from the logs.
func buildVersion() string { return buildinfo.Version(version) }
