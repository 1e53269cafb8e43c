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

// Package keyedlimit rate-limits by key (a source address, a user) in
// bounded memory: a token bucket per key, so that one key's flood spends
// its own bucket and no other's.
package keyedlimit

import (
	"net"
	"net/netip"
	"sync"

	"golang.org/x/time/rate"
)

// Limiter holds a token bucket of rate r and burst b for each key it has
// seen, at most max keys.
type Limiter struct {
	r     rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// New returns a Limiter of r events a second with bursts of burst per key,
// remembering at most limit keys.
func New(r float64, burst, limit int) *Limiter {
	return &Limiter{r: rate.Limit(r), burst: burst, max: limit, buckets: map[string]*rate.Limiter{}}
}

// Allow takes one event from key's bucket and says whether there was one.
func (l *Limiter) Allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucketLocked(key).Allow()
}

// Exhausted says whether key's bucket is empty now, taking nothing.
func (l *Limiter) Exhausted(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	return ok && b.Tokens() < 1
}

// Len is how many keys the Limiter remembers.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func (l *Limiter) bucketLocked(key string) *rate.Limiter {
	if b, ok := l.buckets[key]; ok {
		return b
	}
	if len(l.buckets) >= l.max {
		// Forget the keys that are back to a full bucket: they cost nothing
		// to recreate. A flood of distinct keys forgets them all, which
		// lets each start afresh but never grows the map.
		for k, b := range l.buckets {
			if b.Tokens() >= float64(l.burst) {
				delete(l.buckets, k)
			}
		}
		if len(l.buckets) >= l.max {
			clear(l.buckets)
		}
	}
	b := rate.NewLimiter(l.r, l.burst)
	l.buckets[key] = b
	return b
}

// Source is the key of a request's remote address: its IP, or for IPv6 its
// /64, which one host commonly holds whole.
func Source(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
