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

package clusterview

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// The informer stores what the transform returns: the token must not be in
// it, only its hash.
func TestHashCredentialKeepsNoToken(t *testing.T) {
	token := []byte("pg_secret-token-value")
	in := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "a-token", Labels: map[string]string{playgroundv1alpha1.TenantLabel: "a"},
			Annotations:   map[string]string{"note": string(token)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}},
		},
		Type:       playgroundv1alpha1.CredentialSecretType,
		Data:       map[string][]byte{playgroundv1alpha1.CredentialTokenKey: token, "other": token},
		StringData: map[string]string{"s": string(token)},
	}
	out, err := hashCredential(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	sum := sha256.Sum256(token)
	if len(s.Data) != 1 || !bytes.Equal(s.Data[tokenHashKey], sum[:]) {
		t.Fatalf("data %v, want only the token's hash", s.Data)
	}
	if s.Annotations != nil || s.StringData != nil || s.ManagedFields != nil {
		t.Fatalf("kept more than needed: %+v", s.ObjectMeta)
	}
	if s.Name != "a-token" || s.Namespace != "ns" || s.Labels[playgroundv1alpha1.TenantLabel] != "a" || s.Type != playgroundv1alpha1.CredentialSecretType {
		t.Fatalf("lost what authentication needs: %+v", s)
	}
	// A Secret without a token hashes to nothing, so no token matches it.
	empty, _ := hashCredential(&corev1.Secret{Type: playgroundv1alpha1.CredentialSecretType})
	if len(empty.(*corev1.Secret).Data) != 0 {
		t.Fatal("an empty token got a hash")
	}
}

// The view counts a watch as broken from a failure or the end of a stream
// until the next watch starts, and refuses once that lasts past the bound.
func TestBrokenWatchBound(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := &tracked{what: "Tenants", now: func() time.Time { return now }}
	if _, down := tr.downSince(); down {
		t.Fatal("down before any failure")
	}
	fake := watch.NewFake()
	w := newObservedWatch(fake, tr.markDown)
	fake.Stop() // the server ended the stream
	for range w.ResultChan() {
	}
	since, down := tr.downSince()
	if !down || !since.Equal(now) {
		t.Fatalf("after the stream ended: down %v since %v", down, since)
	}
	now = now.Add(time.Minute)
	tr.markDown() // a failed retry does not move the start
	if since2, _ := tr.downSince(); !since2.Equal(since) {
		t.Fatalf("a second failure moved the start to %v", since2)
	}
	tr.markUp()
	if _, down := tr.downSince(); down {
		t.Fatal("still down after a watch started")
	}

	// Stop by the reflector is not a failure.
	fake = watch.NewFake()
	w = newObservedWatch(fake, tr.markDown)
	w.Stop()
	for range w.ResultChan() {
	}
	if _, down := tr.downSince(); down {
		t.Fatal("Stop counted as a broken watch")
	}
}
