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

package backend

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// idPattern bounds sandbox IDs to what is safe as a path element, a runc
// container ID and a hostname.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidateID refuses a sandbox ID that is not safe as a path element, a
// runtime's container name and a hostname: 1-63 of [A-Za-z0-9_.-],
// starting alphanumeric, with no "..". Every backend checks it before an ID
// reaches a path or a command; one whose own names are narrower (a jail's
// has no dot, a Lima instance's no run of separators) checks its rule as
// well. The error says which rule, without the backend's name.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("invalid sandbox ID %q: want 1-63 of [A-Za-z0-9_.-], starting alphanumeric", id)
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// IsEnvName reports whether name is a shell identifier, as the name of a
// login environment variable must be: a login profile exports it
// unquoted. The API admits the same names (api/v1alpha1's EnvVar).
func IsEnvName(name string) bool { return envName.MatchString(name) }

// ValidateLogin checks what a Spec puts in the login profile: variable
// names that are shell identifiers, and no NUL byte in a value, the
// persona or the login script, which the profile holds as text. The error
// is without the backend's name.
func ValidateLogin(spec Spec) error {
	for _, e := range spec.LoginEnv {
		if !IsEnvName(e.Name) {
			return fmt.Errorf("login environment variable name %q is not a shell identifier", e.Name)
		}
		if strings.ContainsRune(e.Value, 0) {
			return fmt.Errorf("login environment variable %s contains a NUL byte", e.Name)
		}
	}
	if strings.ContainsRune(spec.Persona, 0) || strings.ContainsRune(spec.LoginScript, 0) {
		return errors.New("persona and login script must not contain NUL bytes")
	}
	return nil
}
