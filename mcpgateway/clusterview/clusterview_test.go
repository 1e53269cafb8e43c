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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/scheme"
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

// A registration the cache saw lapse is read again from the API server
// before its node is called gone (the cache may trail a restarted API
// server for a minute), at most once a second per node; what the API
// server says lapsed, or cannot say, is gone.
func TestLapsedRegistrationIsReadAgain(t *testing.T) {
	now := time.Unix(100_000, 0)
	lease := func(renewed time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "leases", Name: agentlease.Name("n1")}}
		reg := agentlease.Registration{Node: "n1", Endpoint: "https://10.0.0.1:9443", Duration: 15 * time.Second}
		if err := reg.Apply(l, renewed); err != nil {
			t.Fatal(err)
		}
		return l
	}
	gets := 0
	live := lease(now.Add(-2 * time.Second)) // renewed 2 s ago
	api := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(live).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	tr := &tracked{what: "agent registrations", now: func() time.Time { return now }}
	tr.informer = toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &coordinationv1.Lease{}, 0, toolscache.Indexers{})
	v := &View{opts: Options{LeaseNamespace: "leases", Now: func() time.Time { return now }}, leases: tr, reader: api, rechecks: map[string]recheck{}}
	ctx := context.Background()

	// The cache holds the registration as renewed a minute ago.
	if err := tr.informer.GetStore().Add(lease(now.Add(-time.Minute))); err != nil {
		t.Fatal(err)
	}
	reg, ok := v.Agent(ctx, "n1")
	if !ok || reg.Endpoint != "https://10.0.0.1:9443" || gets != 1 {
		t.Fatalf("lapsed in the cache, current in the API server: %+v %v after %d reads; want it current after 1", reg, ok, gets)
	}
	for range 10 {
		v.Agent(ctx, "n1")
	}
	if gets != 1 {
		t.Errorf("%d reads within a second, want 1", gets)
	}

	// Lapsed in the API server too: gone, and read again a second later.
	live.Spec.RenewTime.Time = now.Add(-time.Minute)
	if err := api.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if _, ok := v.Agent(ctx, "n1"); ok || gets != 2 {
		t.Errorf("lapsed everywhere: current %v after %d reads, want gone after 2", ok, gets)
	}
	// A node the API server does not know is gone.
	if _, ok := v.Agent(ctx, "n2"); ok {
		t.Error("a node without a Lease is current")
	}

	// A current registration in the cache needs no read.
	now = now.Add(time.Minute)
	if err := tr.informer.GetStore().Update(lease(now)); err != nil {
		t.Fatal(err)
	}
	before := gets
	if _, ok := v.Agent(ctx, "n1"); !ok || gets != before {
		t.Errorf("current in the cache: %v after %d more reads", ok, gets-before)
	}
}
