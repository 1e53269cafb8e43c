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
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestReviewsAreRateLimited: made-up tokens cost the API server at most the
// review budget; past it they are refused as busy (503), not reviewed, and
// a token already reviewed is still served from the cache. The API server
// is client-go's fake here: what is under test is how many reviews the
// agent asks for, which the real one does not count.
func TestReviewsAreRateLimited(t *testing.T) {
	cs := fake.NewClientset()
	reviews := 0
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "known" && len(tr.Spec.Audiences) == 1 {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "gw"}}
		}
		return true, tr, nil
	})
	k := &KubeAuth{Client: cs, Audience: "a", Gateways: []string{"gw"}, ReviewsPerSecond: 0.001, ReviewBurst: 5}
	ctx := context.Background()
	if c, err := k.Authenticate(ctx, "known"); err != nil || !c.Gateway {
		t.Fatalf("the gateway's token: %+v, %v", c, err)
	}
	busy := 0
	for i := range 100 {
		_, err := k.Authenticate(ctx, fmt.Sprintf("made-up-%d", i))
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
	if c, err := k.Authenticate(ctx, "known"); err != nil || !c.Gateway {
		t.Fatalf("the gateway's token, cached, past the limit: %+v, %v", c, err)
	}
}
