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

// Package bearermirror is the contract between the manager, which copies
// the internal bearer of each service WorkerMapping (from the team's
// Secret of type playground.dev/worker-bearer) into Secrets of its own
// namespace, and the gateway, which reads those Secrets by name and no
// other: the gateway, the internet-facing component, needs no right on
// any tenant's Secret.
//
// The copies are spread over a fixed set of Secrets, Shards of them, named
// SecretName(i) (the gateway's RBAC names each), a mapping's in
// SecretName(ShardOf(namespace, name)) under Key(namespace, name). A
// Secret holds at most 1 MiB, so one would not do: 64 hold 10,000
// mappings with bearers of MaxBearerBytes (TestTenThousandMappingsFit).
package bearermirror

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	// Shards is how many Secrets hold the copies. It is fixed: the
	// gateway's Role names each of them (resourceNames), and the manager
	// and the gateway must find a mapping's in the same one.
	Shards = 64
	// NamePrefix begins the name of each Secret: NamePrefix and two digits.
	NamePrefix = "playground-worker-bearers-"
	// SecretType is the type of the Secrets the manager writes: the
	// gateway uses no other Secret of those names.
	SecretType corev1.SecretType = "playground.dev/worker-bearers"
	// MaxBearerBytes bounds one bearer: what an Authorization header
	// carries comfortably, a JWT included. A longer one is refused (the
	// mapping says so) rather than copied.
	MaxBearerBytes = 4096
	// MaxShardBytes bounds what one Secret holds, keys and bearers: under
	// the API server's 1 MiB of a Secret's data and etcd's 1.5 MiB a
	// request, with room for the object around them.
	MaxShardBytes = 1_000_000
	// maxKeyBytes is the longest key of a Secret's data.
	maxKeyBytes = 253
)

// SecretName is the name of the Secret of shard i.
func SecretName(i int) string { return fmt.Sprintf("%s%02d", NamePrefix, i) }

// SecretNames are the names of every shard's Secret, in order.
func SecretNames() []string {
	names := make([]string, Shards)
	for i := range names {
		names[i] = SecretName(i)
	}
	return names
}

// ShardOfName returns the shard whose Secret is called name.
func ShardOfName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, NamePrefix)
	if !ok || len(digits) != 2 {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || i >= Shards {
		return 0, false
	}
	return i, true
}

// ShardOf is the shard of the mapping name of namespace: FNV-1a of
// "namespace/name", modulo Shards.
func ShardOf(namespace, name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return int(h.Sum32() % Shards)
}

// Key is the key of the mapping name of namespace in its shard's Secret:
// "namespace.name". A namespace has no dot, so the first dot ends it. A
// mapping's name may be longer than a key may be; such a one is
// "namespace._" and the SHA-256 of its name in hex, which no name can be
// (no object's name has an underscore).
func Key(namespace, name string) string {
	if k := namespace + "." + name; len(k) <= maxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(name))
	return namespace + "._" + hex.EncodeToString(sum[:])
}

// NamespaceOfKey is the namespace of a key Key made.
func NamespaceOfKey(key string) string {
	ns, _, _ := strings.Cut(key, ".")
	return ns
}

// EntryBytes is what one entry takes of a shard's MaxShardBytes.
func EntryBytes(key, bearer string) int { return len(key) + len(bearer) }

// ErrNoBearer is Bearer's error when the Secret's value under the key is
// missing or blank.
var ErrNoBearer = errors.New("no bearer")

// Bearer is the bearer a worker-bearer Secret holds as value: without
// the white space around it (a file written with a final newline), 1 to
// MaxBearerBytes visible ASCII characters, as a token of an Authorization
// header is (RFC 6750). A missing or blank value is ErrNoBearer.
func Bearer(value []byte) (string, error) {
	b := strings.TrimSpace(string(value))
	switch {
	case b == "":
		return "", ErrNoBearer
	case len(b) > MaxBearerBytes:
		return "", fmt.Errorf("it is %d bytes long, and a worker's bearer is at most %d", len(b), MaxBearerBytes)
	}
	for i := range len(b) {
		if b[i] < 0x21 || b[i] > 0x7e {
			// Neither the byte nor where it is: it is part of a secret.
			return "", errors.New("it has a byte that is no visible ASCII character (a space, a control character or a non-ASCII one), which an Authorization header does not carry in a token")
		}
	}
	return b, nil
}

// Entry is one mapping's bearer to be held in its shard.
type Entry struct {
	Namespace, Name string
	Bearer          string
}

// Key is the entry's key (Key).
func (e Entry) Key() string { return Key(e.Namespace, e.Name) }

// Layout returns the data of one shard's Secret that holds entries (all
// of the shard's, each a valid Bearer), given the data it holds now, and
// the entries left out for want of room (nil when all fit).
//
// While everything fits, everything is held. When not, the room is shared
// by namespace: the namespace that holds the fewest bytes so far (the
// first by name on a tie) takes its next entry, one at a time, until its
// next does not fit; within a namespace, the entries the Secret holds
// already come first, then the others by key. So the namespace that holds
// the most of a shard is the one whose entries are left out, a namespace
// that fills a shard keeps no other namespace's mapping from it, and a
// mapping held is not displaced by a newer one of its own namespace.
func Layout(current map[string][]byte, entries []Entry) (map[string][]byte, []Entry) {
	byNS := map[string][]Entry{}
	total := 0
	for _, e := range entries {
		byNS[e.Namespace] = append(byNS[e.Namespace], e)
		total += EntryBytes(e.Key(), e.Bearer)
	}
	data := make(map[string][]byte, len(entries))
	if total <= MaxShardBytes {
		for _, e := range entries {
			data[e.Key()] = []byte(e.Bearer)
		}
		return data, nil
	}
	active := make([]string, 0, len(byNS))
	for ns, es := range byNS {
		active = append(active, ns)
		slices.SortFunc(es, func(a, b Entry) int {
			_, aHeld := current[a.Key()]
			_, bHeld := current[b.Key()]
			if aHeld != bHeld {
				if aHeld {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.Key(), b.Key())
		})
	}
	slices.Sort(active)
	held := make(map[string]int, len(active)) // bytes, by namespace
	next := make(map[string]int, len(active)) // the index of each namespace's next entry
	var left []Entry
	used := 0
	for len(active) > 0 {
		at := 0
		for i, ns := range active {
			if held[ns] < held[active[at]] {
				at = i
			}
		}
		ns := active[at]
		e := byNS[ns][next[ns]]
		if n := EntryBytes(e.Key(), e.Bearer); used+n <= MaxShardBytes {
			data[e.Key()] = []byte(e.Bearer)
			used += n
			held[ns] += n
			next[ns]++
			if next[ns] < len(byNS[ns]) {
				continue
			}
		} else {
			left = append(left, byNS[ns][next[ns]:]...)
		}
		active = slices.Delete(active, at, at+1)
	}
	return data, left
}

// Used is what data (a shard's Secret's) takes of its MaxShardBytes.
func Used(data map[string][]byte) int {
	n := 0
	for k, v := range data {
		n += EntryBytes(k, string(v))
	}
	return n
}

// Largest is the namespace whose entries take the most of data (a shard's
// Secret's), and how many bytes: the first to give way when it is full.
func Largest(data map[string][]byte) (namespace string, bytes int) {
	by := map[string]int{}
	for k, v := range data {
		by[NamespaceOfKey(k)] += EntryBytes(k, string(v))
	}
	for ns, n := range by {
		if n > bytes || (n == bytes && ns < namespace) {
			namespace, bytes = ns, n
		}
	}
	return namespace, bytes
}
