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

package hostagent_test

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// TestImageCredentialsPerObject: a Sandbox object's credentials are its
// own (another UID of the same name has none), resolve to the registry's
// user, are replaced and forgotten; a config that is no Docker config is
// refused without being quoted, and leaves what was held.
func TestImageCredentialsPerObject(t *testing.T) {
	c := hostagent.NewImageCredentials()
	obj := hostagent.SandboxObject{Namespace: "team-a", Name: "x", UID: "uid-1"}
	if kc := c.Keychain("team-a", "x", "uid-1"); kc != nil {
		t.Fatal("a keychain before any delivery")
	}
	config := func(user string) []byte {
		return []byte(`{"auths":{"registry.test":{"username":"` + user + `","password":"p4ss-` + user + `"}}}`)
	}
	userOf := func(kc authn.Keychain) string {
		t.Helper()
		repo, err := name.NewRepository("registry.test/team/private")
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(repo)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Username
	}
	if err := c.SetImageCredentials(obj, [][]byte{config("first")}); err != nil {
		t.Fatal(err)
	}
	if got := userOf(c.Keychain("team-a", "x", "uid-1")); got != "first" {
		t.Fatalf("user %q, want first", got)
	}
	if c.Keychain("team-a", "x", "uid-2") != nil {
		t.Fatal("another incarnation of the Sandbox has its credentials")
	}
	err := c.SetImageCredentials(obj, [][]byte{[]byte(`{"auths":{"p4ss-%zz":{}}}`)})
	if agentapi.CodeOf(err) != agentapi.CodeInvalid || strings.Contains(err.Error(), "p4ss") {
		t.Fatalf("a config ggcr cannot read: %v", err)
	}
	if got := userOf(c.Keychain("team-a", "x", "uid-1")); got != "first" {
		t.Fatalf("a refused config replaced the credentials: user %q", got)
	}
	if err := c.SetImageCredentials(obj, [][]byte{config("second")}); err != nil {
		t.Fatal(err)
	}
	if got := userOf(c.Keychain("team-a", "x", "uid-1")); got != "second" {
		t.Fatalf("user %q, want second", got)
	}
	if err := c.SetImageCredentials(obj, nil); err != nil {
		t.Fatal(err)
	}
	if c.Keychain("team-a", "x", "uid-1") != nil {
		t.Fatal("credentials kept after an empty delivery")
	}
}
