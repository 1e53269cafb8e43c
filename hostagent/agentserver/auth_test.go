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

package agentserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// TestReviewsAreRateLimited: made-up tokens cost the API server at most the
// review budget of their source; past it they are refused as busy (503),
// not reviewed, while another source (the gateway, with a token not yet
// reviewed) is served, and a token already reviewed is still served from
// the cache. The API server is client-go's fake here: what is under test
// is how many reviews the agent asks for, which the real one does not
// count.
func TestReviewsAreRateLimited(t *testing.T) {
	cs := fake.NewClientset()
	reviews := 0
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if strings.HasPrefix(tr.Spec.Token, "known") && len(tr.Spec.Audiences) == 1 {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "gw"}}
		}
		return true, tr, nil
	})
	k := &KubeAuth{Client: cs, Audience: "a", Gateways: []string{"gw"}, ReviewsPerSecond: 0.001, ReviewBurst: 5}
	ctx := context.Background()
	if c, err := k.Authenticate(ctx, "known", "10.0.0.1"); err != nil || !c.Gateway {
		t.Fatalf("the gateway's token: %+v, %v", c, err)
	}
	busy := 0
	for i := range 100 {
		_, err := k.Authenticate(ctx, fmt.Sprintf("made-up-%d", i), "10.6.6.6")
		switch {
		case errors.Is(err, errReviewsBusy):
			busy++
		case !errors.Is(err, errUnauthenticated):
			t.Fatalf("a made-up token: %v", err)
		}
	}
	if reviews > 1+2*5 || busy < 90 {
		t.Fatalf("%d reviews for 101 tokens, %d refused as busy: want at most the burst reviewed", reviews, busy)
	}
	if c, err := k.Authenticate(ctx, "known", "10.0.0.1"); err != nil || !c.Gateway {
		t.Fatalf("the gateway's token, cached, past the limit: %+v, %v", c, err)
	}
	if c, err := k.Authenticate(ctx, "known-renewed", "10.0.0.1"); err != nil || !c.Gateway {
		t.Fatalf("the gateway's new token, from its own source, while another source floods: %+v, %v", c, err)
	}

	// Many sources together meet the total bound.
	k = &KubeAuth{Client: cs, Audience: "a", ReviewsPerSecond: 0.001, ReviewBurst: 5, TotalReviewsPerSecond: 0.001, TotalReviewBurst: 20}
	reviews, busy = 0, 0
	for i := range 100 {
		if _, err := k.Authenticate(ctx, fmt.Sprintf("made-up-%d", i), fmt.Sprintf("10.7.0.%d", i)); errors.Is(err, errReviewsBusy) {
			busy++
		}
	}
	if reviews > 2*20 || busy < 80 {
		t.Fatalf("%d reviews for 100 tokens of 100 sources, %d refused: want at most the total burst reviewed", reviews, busy)
	}
}

// TestAccessReviewsAreCachedAndBounded: a user's access to a tenant is
// asked of the API server once per AccessCacheTTL; a user naming ever new
// tenants spends its own budget of reviews, then is refused as busy.
func TestAccessReviewsAreCachedAndBounded(t *testing.T) {
	cs := fake.NewClientset()
	sars := 0
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sars++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == "alice" && sar.Spec.ResourceAttributes.Name == "mine"
		return true, sar, nil
	})
	now := time.Unix(1000, 0)
	k := &KubeAuth{Client: cs, ReviewsPerSecond: 0.001, ReviewBurst: 5, AccessCacheTTL: 10 * time.Second, now: func() time.Time { return now }}
	ctx := context.Background()
	alice := Caller{Name: "alice", user: &authenticationv1.UserInfo{Username: "alice", Groups: []string{"g"}}}
	for range 3 {
		if err := k.MayUse(ctx, alice, "ns/mine"); err != nil {
			t.Fatal(err)
		}
		if err := k.MayUse(ctx, alice, "ns/theirs"); agentapi.CodeOf(err) != agentapi.CodeForbidden {
			t.Fatalf("another tenant: %v", err)
		}
	}
	if sars != 2 {
		t.Fatalf("%d access reviews for 6 requests about 2 tenants, want 2", sars)
	}
	now = now.Add(11 * time.Second)
	if err := k.MayUse(ctx, alice, "ns/mine"); err != nil || sars != 3 {
		t.Fatalf("past the TTL: %v, %d reviews, want a new one", err, sars)
	}
	busy := 0
	for i := range 50 {
		if err := k.MayUse(ctx, alice, fmt.Sprintf("ns/t%d", i)); agentapi.CodeOf(err) == agentapi.CodeUnavailable {
			busy++
		}
	}
	if sars > 3+5 || busy < 45 {
		t.Fatalf("%d reviews for 50 new tenants, %d refused as busy: want at most the burst", sars-3, busy)
	}
}
