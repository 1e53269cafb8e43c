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

package selfowner

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// token makes a JWT with the given payload, as the kubelet projects one
// (the signature is not read).
func token(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(payload)) + "." + enc([]byte("signature"))
}

const projected = `{"aud":["https://kubernetes.default.svc"],"exp":1,"iat":1,"iss":"https://kubernetes.default.svc",
"kubernetes.io":{"namespace":"playground-system","node":{"name":"n1","uid":"n"},"pod":{"name":"agent-x","uid":"p"},
"serviceaccount":{"name":"playground-agent","uid":"0b1e7c4e-5e0b-4f43-9d2c-7f1c2a3b4c5d"}},
"sub":"system:serviceaccount:playground-system:playground-agent"}`

func TestFromTokenOwnsObjectsOfItsNamespaceOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token(projected)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := FromToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if o.Namespace != "playground-system" || o.Name != "playground-agent" || o.UID != "0b1e7c4e-5e0b-4f43-9d2c-7f1c2a3b4c5d" {
		t.Fatalf("owner %+v", o)
	}

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "playground-system", Name: "agent-n1"}}
	if !o.Own(lease) {
		t.Fatal("Own did not change a Lease of its namespace")
	}
	if o.Own(lease) {
		t.Error("Own changed a Lease it already owned")
	}
	refs := lease.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "ServiceAccount" || refs[0].APIVersion != "v1" || refs[0].Name != "playground-agent" ||
		refs[0].UID != o.UID || refs[0].BlockOwnerDeletion != nil || refs[0].Controller != nil {
		t.Errorf("owner references %+v", refs)
	}

	// Another namespace: the garbage collector would take the owner for
	// absent and delete the object.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "agent-n1"}}
	if o.Own(other) || len(other.OwnerReferences) != 0 {
		t.Errorf("Own set %+v on an object of another namespace", other.OwnerReferences)
	}
	var none *Owner
	if none.Own(lease) {
		t.Error("a nil Owner changed an object")
	}
}

func TestFromTokenWithoutATokenOwnsNothing(t *testing.T) {
	o, err := FromToken(filepath.Join(t.TempDir(), "absent"))
	if o != nil || err != nil {
		t.Fatalf("FromToken of no file = %v, %v; want nil, nil", o, err)
	}
}

func TestParseRefusesWhatIsNotAProjectedToken(t *testing.T) {
	for name, tok := range map[string]string{
		"not a JWT":     "abc",
		"bad base64":    "a.%%%.c",
		"not JSON":      token("nope"),
		"legacy secret": token(`{"iss":"kubernetes/serviceaccount","kubernetes.io/serviceaccount/namespace":"ns"}`),
	} {
		if o, err := Parse(tok); err == nil || !strings.HasPrefix(err.Error(), "selfowner: ") {
			t.Errorf("%s: Parse = %v, %v; want a selfowner error", name, o, err)
		}
	}
}
