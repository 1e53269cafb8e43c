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
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// Caller is who called the agent, as its Authenticator proved.
type Caller struct {
	// Name is the caller's identity, for logs.
	Name string
	// Gateway is true for a trusted gateway: it authenticated the tenant
	// itself, so the tenant a request names is taken as given.
	Gateway bool
	// user is a Kubernetes user, allowed a tenant by a SubjectAccessReview
	// on each request; nil for a gateway.
	user *authenticationv1.UserInfo
}

// Authenticator proves who presented a bearer token. An error means the
// token proves no identity this agent accepts (401).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Caller, error)
}

// TenantAuthorizer decides whether a caller that is not a trusted gateway
// may act as a tenant.
type TenantAuthorizer interface {
	MayUse(ctx context.Context, c Caller, tenant string) error
}

// KubeAuth authenticates callers by their Kubernetes identity:
//
//   - a token bound to this node's audience (agentapi.NodeAudience) whose
//     TokenReview names one of Gateways is a trusted gateway;
//   - any other token the API server authenticates (a stdio user's own
//     kubeconfig token) is a user, who may act only as the tenants a
//     SubjectAccessReview allows it to "use", asked on every request, so
//     that removing a RoleBinding stops it at the next one.
//
// TokenReview answers are cached for CacheTTL (bounded: CacheSize tokens,
// by their SHA-256), so a busy gateway costs the API server one review
// per node and minute. Reviews of tokens not in the cache are rate-limited
// (ReviewsPerSecond, ReviewBurst): whoever reaches the agent's port with
// made-up tokens gets 503s, not the API server's attention.
type KubeAuth struct {
	Client   kubernetes.Interface
	Audience string
	Gateways []string

	CacheTTL         time.Duration
	CacheSize        int
	ReviewsPerSecond float64
	ReviewBurst      int
	now              func() time.Time

	mu      sync.Mutex
	cache   map[[sha256.Size]byte]cached
	reviews *rate.Limiter
}

type cached struct {
	caller  Caller
	err     error
	expires time.Time
}

// Defaults of KubeAuth.
const (
	DefaultAuthCacheTTL     = time.Minute
	DefaultAuthCacheSize    = 4096
	DefaultReviewsPerSecond = 20
	DefaultReviewBurst      = 40
)

// errReviewsBusy refuses a review past the rate limit.
var errReviewsBusy = errors.New("too many unknown tokens to review right now")

// Authenticate implements Authenticator.
func (k *KubeAuth) Authenticate(ctx context.Context, token string) (Caller, error) {
	now := time.Now
	if k.now != nil {
		now = k.now
	}
	key := sha256.Sum256([]byte(token))
	k.mu.Lock()
	if c, ok := k.cache[key]; ok && now().Before(c.expires) {
		k.mu.Unlock()
		return c.caller, c.err
	}
	if k.reviews == nil {
		perSecond, burst := k.ReviewsPerSecond, k.ReviewBurst
		if perSecond <= 0 {
			perSecond = DefaultReviewsPerSecond
		}
		if burst <= 0 {
			burst = DefaultReviewBurst
		}
		k.reviews = rate.NewLimiter(rate.Limit(perSecond), burst)
	}
	allowed := k.reviews.Allow()
	k.mu.Unlock()
	if !allowed {
		return Caller{}, errReviewsBusy
	}

	caller, err := k.review(ctx, token)
	if err != nil && !errors.Is(err, errUnauthenticated) {
		return Caller{}, err // the API server could not answer: not cached
	}
	ttl, size := k.CacheTTL, k.CacheSize
	if ttl <= 0 {
		ttl = DefaultAuthCacheTTL
	}
	if size <= 0 {
		size = DefaultAuthCacheSize
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cache == nil || len(k.cache) >= size {
		k.cache = make(map[[sha256.Size]byte]cached) // bounded: start over
	}
	k.cache[key] = cached{caller: caller, err: err, expires: now().Add(ttl)}
	return caller, err
}

var errUnauthenticated = errors.New("the bearer token proves no identity this agent accepts: the gateway presents a token for this node's audience, a stdio user its kubeconfig's token")

// review asks the API server who the token is: first as bound to this
// agent's audience, then as the API server's own.
func (k *KubeAuth) review(ctx context.Context, token string) (Caller, error) {
	for _, audiences := range [][]string{{k.Audience}, nil} {
		tr, err := k.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
		}, metav1.CreateOptions{})
		if err != nil {
			return Caller{}, fmt.Errorf("reviewing a caller's token: %w", err)
		}
		if !tr.Status.Authenticated {
			continue
		}
		user := tr.Status.User
		if slices.Contains(k.Gateways, user.Username) {
			if audiences == nil {
				// A gateway is a gateway only with a token for this
				// node; its other tokens are never a tenant's user.
				return Caller{}, errGatewayUnbound
			}
			return Caller{Name: user.Username, Gateway: true}, nil
		}
		return Caller{Name: user.Username, user: &user}, nil
	}
	return Caller{}, errUnauthenticated
}

// errGatewayUnbound refuses a trusted gateway's token that is not bound to
// this node: the gateway's identity may read every tenant's objects, so it
// acts as a tenant only through the node-bound token, never as a user.
var errGatewayUnbound = fmt.Errorf("%w (a gateway's token must be bound to this node's audience; its other tokens act as no tenant)", errUnauthenticated)

// MayUse implements TenantAuthorizer with a SubjectAccessReview of the
// caller's identity: the verb "use" on the tenant.
func (k *KubeAuth) MayUse(ctx context.Context, c Caller, tenant string) error {
	if c.Gateway {
		return nil
	}
	ns, name, ok := strings.Cut(tenant, "/")
	if c.user == nil || !ok || ns == "" || name == "" {
		return denied(c, tenant, "")
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(c.user.Extra))
	for k, v := range c.user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	attrs := playgroundv1alpha1.TenantUseAttributes(ns, name)
	sar, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: c.user.Username, UID: c.user.UID, Groups: c.user.Groups, Extra: extra,
			ResourceAttributes: &attrs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err,
			Message: "the agent could not ask the API server whether you may use the tenant: retry shortly"}
	}
	if sar.Status.Allowed && !sar.Status.Denied {
		return nil
	}
	return denied(c, tenant, sar.Status.Reason)
}

func denied(c Caller, tenant, reason string) error {
	msg := fmt.Sprintf("%s may not use tenant %s on this agent: it needs the RBAC verb %q on tenants.playground.dev of that name in its namespace", c.Name, tenant, playgroundv1alpha1.UseVerb)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	return &agentapi.Error{Code: agentapi.CodeForbidden, Message: msg}
}
