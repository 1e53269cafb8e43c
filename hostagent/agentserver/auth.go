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
	"github.com/playground-dev/playground/internal/keyedlimit"
)

// Caller is who called the agent, as its Authenticator proved.
type Caller struct {
	// Name is the caller's identity, for logs.
	Name string
	// Gateway is true for a trusted gateway: it authenticated the tenant
	// itself, so the tenant a request names is taken as given.
	Gateway bool
	// Manager is true for the trusted manager, which alone delivers
	// brokered egress credentials.
	Manager bool
	// user is a Kubernetes user, allowed a tenant by a SubjectAccessReview
	// on each request; nil for a gateway.
	user *authenticationv1.UserInfo
}

// Authenticator proves who presented a bearer token. source is where the
// request came from (keyedlimit.Source of its remote address), so that
// one source's junk spends its own budget of reviews. An error means the
// token proves no identity this agent accepts (401).
type Authenticator interface {
	Authenticate(ctx context.Context, token, source string) (Caller, error)
}

// TenantAuthorizer decides whether a caller that is not a trusted gateway
// may act as a tenant.
type TenantAuthorizer interface {
	MayUse(ctx context.Context, c Caller, tenant string) error
}

// ResourceAuthorizer decides whether a user may do what attrs say to the
// cluster's objects (the piles a node retains of Sandboxes: their RBAC).
type ResourceAuthorizer interface {
	MayAccess(ctx context.Context, c Caller, attrs authorizationv1.ResourceAttributes) error
}

// KubeAuth authenticates callers by their Kubernetes identity:
//
//   - a token bound to this node's audience (agentapi.NodeAudience) whose
//     TokenReview names one of Gateways is a trusted gateway; one of
//     Managers, the manager (brokered egress credentials only);
//   - any other token the API server authenticates (a stdio user's own
//     kubeconfig token) is a user, who may act only as the tenants a
//     SubjectAccessReview allows it to "use", asked again once its answer
//     is AccessCacheTTL old, so that removing a RoleBinding stops it within
//     that.
//
// TokenReview answers are cached for CacheTTL (bounded: CacheSize tokens,
// by their SHA-256), so a busy gateway costs the API server one review
// per node and minute. Reviews of tokens not in the cache are rate-limited
// per source (ReviewsPerSecond, ReviewBurst) and in all (TotalReviewsPerSecond,
// TotalReviewBurst): whoever reaches the agent's port with made-up tokens
// gets 503s, not the API server's attention, and spends its own budget,
// not the gateway's. Access reviews are cached likewise (AccessCacheSize
// answers) and rate-limited per user (ReviewsPerSecond, ReviewBurst).
type KubeAuth struct {
	Client   kubernetes.Interface
	Audience string
	Gateways []string
	// Managers are the manager's identities: with a token bound to this
	// node, it delivers brokered egress credentials, and nothing else.
	Managers []string

	CacheTTL              time.Duration
	CacheSize             int
	ReviewsPerSecond      float64
	ReviewBurst           int
	TotalReviewsPerSecond float64
	TotalReviewBurst      int
	AccessCacheTTL        time.Duration
	AccessCacheSize       int
	now                   func() time.Time

	once     sync.Once
	mu       sync.Mutex
	cache    map[[sha256.Size]byte]cached
	access   map[[sha256.Size]byte]accessAnswer
	total    *rate.Limiter
	bySource *keyedlimit.Limiter
	byUser   *keyedlimit.Limiter
}

type cached struct {
	caller  Caller
	err     error
	expires time.Time
}

type accessAnswer struct {
	allowed bool
	reason  string
	expires time.Time
}

// Defaults of KubeAuth.
const (
	DefaultAuthCacheTTL          = time.Minute
	DefaultAuthCacheSize         = 4096
	DefaultReviewsPerSecond      = 20
	DefaultReviewBurst           = 40
	DefaultTotalReviewsPerSecond = 200
	DefaultTotalReviewBurst      = 400
	DefaultAccessCacheTTL        = 10 * time.Second
	DefaultAccessCacheSize       = 4096
	// maxSources bounds the sources and users whose buckets are kept.
	maxSources = 4096
)

// errReviewsBusy refuses a review past the rate limit.
var errReviewsBusy = errors.New("too many unknown tokens to review right now")

func (k *KubeAuth) init() {
	k.once.Do(func() {
		if k.ReviewsPerSecond <= 0 {
			k.ReviewsPerSecond = DefaultReviewsPerSecond
		}
		if k.ReviewBurst <= 0 {
			k.ReviewBurst = DefaultReviewBurst
		}
		if k.TotalReviewsPerSecond <= 0 {
			k.TotalReviewsPerSecond = DefaultTotalReviewsPerSecond
		}
		if k.TotalReviewBurst <= 0 {
			k.TotalReviewBurst = DefaultTotalReviewBurst
		}
		if k.CacheTTL <= 0 {
			k.CacheTTL = DefaultAuthCacheTTL
		}
		if k.CacheSize <= 0 {
			k.CacheSize = DefaultAuthCacheSize
		}
		if k.AccessCacheTTL <= 0 {
			k.AccessCacheTTL = DefaultAccessCacheTTL
		}
		if k.AccessCacheSize <= 0 {
			k.AccessCacheSize = DefaultAccessCacheSize
		}
		if k.now == nil {
			k.now = time.Now
		}
		k.total = rate.NewLimiter(rate.Limit(k.TotalReviewsPerSecond), k.TotalReviewBurst)
		k.bySource = keyedlimit.New(k.ReviewsPerSecond, k.ReviewBurst, maxSources)
		k.byUser = keyedlimit.New(k.ReviewsPerSecond, k.ReviewBurst, maxSources)
	})
}

// Authenticate implements Authenticator.
func (k *KubeAuth) Authenticate(ctx context.Context, token, source string) (Caller, error) {
	k.init()
	key := sha256.Sum256([]byte(token))
	k.mu.Lock()
	if c, ok := k.cache[key]; ok && k.now().Before(c.expires) {
		k.mu.Unlock()
		return c.caller, c.err
	}
	k.mu.Unlock()
	// The source's own budget first: a flood from one source empties its
	// bucket and never reaches the total, which the others share.
	if !k.bySource.Allow(source) || !k.total.Allow() {
		return Caller{}, errReviewsBusy
	}

	caller, err := k.review(ctx, token)
	if err != nil && !errors.Is(err, errUnauthenticated) {
		return Caller{}, err // the API server could not answer: not cached
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cache == nil || len(k.cache) >= k.CacheSize {
		k.cache = make(map[[sha256.Size]byte]cached) // bounded: start over
	}
	k.cache[key] = cached{caller: caller, err: err, expires: k.now().Add(k.CacheTTL)}
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
		if slices.Contains(k.Managers, user.Username) {
			if audiences == nil {
				return Caller{}, errGatewayUnbound
			}
			// Not a gateway, not a user: it acts as no tenant.
			return Caller{Name: user.Username, Manager: true}, nil
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
// caller's identity: the verb "use" on the tenant, its answer kept for
// AccessCacheTTL.
func (k *KubeAuth) MayUse(ctx context.Context, c Caller, tenant string) error {
	if c.Gateway {
		return nil
	}
	ns, name, ok := strings.Cut(tenant, "/")
	if c.user == nil || !ok || ns == "" || name == "" {
		return denied(c, tenant, "")
	}
	return k.authorize(ctx, c, playgroundv1alpha1.TenantUseAttributes(ns, name), func(reason string) error { return denied(c, tenant, reason) },
		"the agent could not ask the API server whether you may use the tenant: retry shortly")
}

// MayAccess implements ResourceAuthorizer with a SubjectAccessReview of a
// user's identity for attrs, its answer kept for AccessCacheTTL. Neither
// a gateway nor the manager is a user: they are refused here, and a call
// open to the manager says so itself.
func (k *KubeAuth) MayAccess(ctx context.Context, c Caller, attrs authorizationv1.ResourceAttributes) error {
	if c.user == nil {
		return deniedAccess(c, attrs, "")
	}
	return k.authorize(ctx, c, attrs, func(reason string) error { return deniedAccess(c, attrs, reason) },
		"the agent could not ask the API server whether you may do that: retry shortly")
}

// authorize asks the API server whether user c may do what attrs say, with
// the answer cached and the questions rate-limited per user; a refusal is
// deny's error.
func (k *KubeAuth) authorize(ctx context.Context, c Caller, attrs authorizationv1.ResourceAttributes, deny func(reason string) error, unavailable string) error {
	k.init()
	key := accessKey(c.user, attrs)
	k.mu.Lock()
	if a, ok := k.access[key]; ok && k.now().Before(a.expires) {
		k.mu.Unlock()
		if a.allowed {
			return nil
		}
		return deny(a.reason)
	}
	k.mu.Unlock()
	if !k.byUser.Allow(c.user.Username) {
		return &agentapi.Error{Code: agentapi.CodeUnavailable, Err: errReviewsBusy,
			Message: "the agent is asking the API server about too many of your requests right now: retry shortly"}
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(c.user.Extra))
	for k, v := range c.user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: c.user.Username, UID: c.user.UID, Groups: c.user.Groups, Extra: extra,
			ResourceAttributes: &attrs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err, Message: unavailable}
	}
	a := accessAnswer{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason, expires: k.now().Add(k.AccessCacheTTL)}
	k.mu.Lock()
	if k.access == nil || len(k.access) >= k.AccessCacheSize {
		k.access = make(map[[sha256.Size]byte]accessAnswer) // bounded: start over
	}
	k.access[key] = a
	k.mu.Unlock()
	if a.allowed {
		return nil
	}
	return deny(a.reason)
}

// accessKey is the key of an access review: everything of the user that
// the API server's answer depends on, and what is asked.
func accessKey(u *authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) [sha256.Size]byte {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(u.Username)
	field(u.UID)
	for _, g := range u.Groups {
		field(g)
	}
	field("")
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field(k)
		for _, v := range u.Extra[k] {
			field(v)
		}
		field("")
	}
	for _, a := range []string{attrs.Namespace, attrs.Verb, attrs.Group, attrs.Version, attrs.Resource, attrs.Subresource, attrs.Name} {
		field(a)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// deniedAccess refuses what attrs say, naming the RBAC it needs.
func deniedAccess(c Caller, attrs authorizationv1.ResourceAttributes, reason string) error {
	what := attrs.Resource + "." + attrs.Group
	if attrs.Name != "" {
		what += " " + attrs.Name
	}
	where := "in namespace " + attrs.Namespace
	if attrs.Namespace == "" {
		where = "in every namespace"
	}
	msg := fmt.Sprintf("%s may not do this on this agent: it needs the RBAC verb %q on %s %s", c.Name, attrs.Verb, what, where)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	return &agentapi.Error{Code: agentapi.CodeForbidden, Message: msg}
}

func denied(c Caller, tenant, reason string) error {
	msg := fmt.Sprintf("%s may not use tenant %s on this agent: it needs the RBAC verb %q on tenants.playground.dev of that name in its namespace", c.Name, tenant, playgroundv1alpha1.UseVerb)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	return &agentapi.Error{Code: agentapi.CodeForbidden, Message: msg}
}
