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
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// Tenants are indexed by the hash their status publishes, when it is one.
func TestTokenHashes(t *testing.T) {
	sum := sha256.Sum256([]byte("pgt_a-token"))
	good := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		hash string
		want []string
	}{
		{good, []string{good}},
		{"", nil},
		{strings.ToUpper(good), nil},
		{good[:63], nil},
		{good + "0", nil},
		{strings.Repeat("g", 64), nil},
	} {
		tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
		tn.Status.Credentials.TokenSHA256 = tc.hash
		got, err := tokenHashes(tn)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("tokenHashes(%q) = %v, %v; want %v", tc.hash, got, err, tc.want)
		}
	}
	if got, _ := tokenHashes(&playgroundv1alpha1.Sandbox{}); got != nil {
		t.Errorf("a Sandbox is indexed under %v", got)
	}
	if got := playgroundv1alpha1.TokenSHA256("pgt_a-token"); got != good {
		t.Errorf("the manager writes %q for the token the gateway looks up as %q", got, good)
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
