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

package backendtest

import (
	"context"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// CheckMalformedKeysRefused installs in sandbox id, through h, each key
// that is not exactly as a pile holds it (64 lowercase hexadecimal digits;
// each made from valid, such a key), and fails t for each one taken, or
// quoted by its refusal: a key is a secret, never in an error.
func CheckMalformedKeysRefused(t testing.TB, h backend.SigningKeyHolder, id, valid string) {
	t.Helper()
	for what, bad := range map[string]string{
		"upper case":    strings.ToUpper(valid),
		"a newline":     valid + "\n",
		"too short":     valid[:63],
		"not hex":       "g" + valid[1:],
		"empty":         "",
		"twice as long": valid + valid,
	} {
		_, err := h.InstallSigningKey(context.Background(), id, []byte(bad))
		if err == nil {
			t.Errorf("%s: installed", what)
		} else if bad != "" && strings.Contains(err.Error(), strings.TrimSpace(bad)) {
			t.Errorf("%s: the error quotes the key: %v", what, err)
		}
	}
}
