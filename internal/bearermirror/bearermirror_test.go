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

package bearermirror

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestTenThousandMappingsFit: 10,000 mappings whose keys are as long as a
// key may be and whose bearers are of the largest size all fit in the
// shards, none left out.
func TestTenThousandMappingsFit(t *testing.T) {
	bearer := strings.Repeat("b", MaxBearerBytes)
	byShard := map[int][]Entry{}
	for i := range 10_000 {
		ns := fmt.Sprintf("team-%03d", i%100)
		base := fmt.Sprintf("worker-%05d-", i)
		name := base + strings.Repeat("x", maxKeyBytes-len(ns)-1-len(base))
		e := Entry{Namespace: ns, Name: name, Bearer: bearer}
		if len(e.Key()) != maxKeyBytes {
			t.Fatalf("key of %d bytes", len(e.Key()))
		}
		byShard[ShardOf(ns, name)] = append(byShard[ShardOf(ns, name)], e)
	}
	most, fewest := 0, MaxShardBytes
	for i := range Shards {
		data, left := Layout(nil, byShard[i])
		if len(left) > 0 {
			t.Errorf("shard %d leaves %d of its %d mappings out", i, len(left), len(byShard[i]))
		}
		if len(data) != len(byShard[i]) {
			t.Errorf("shard %d holds %d of its %d mappings", i, len(data), len(byShard[i]))
		}
		most, fewest = max(most, Used(data)), min(fewest, Used(data))
	}
	t.Logf("10,000 mappings of %d-byte keys and %d-byte bearers: the fullest shard holds %d bytes of %d (%.0f%%), the emptiest %d",
		maxKeyBytes, MaxBearerBytes, most, MaxShardBytes, 100*float64(most)/MaxShardBytes, fewest)
}

// TestLayoutShares: a namespace that fills a shard keeps another
// namespace's mapping from it no longer than until its next layout, and
// its own held entries are not displaced by its newer ones.
func TestLayoutShares(t *testing.T) {
	bearer := strings.Repeat("b", MaxBearerBytes)
	var hog []Entry
	for i := 0; ; i++ {
		hog = append(hog, Entry{Namespace: "hog", Name: fmt.Sprintf("m-%04d", i), Bearer: bearer})
		if data, left := Layout(nil, hog); len(left) > 0 {
			if len(data) != i || left[0].Name != fmt.Sprintf("m-%04d", i) {
				t.Fatalf("the entry past the room: %d held, %v left out", len(data), left[0].Name)
			}
			break
		}
	}
	full, _ := Layout(nil, hog)

	// A newer entry of the hog's own (sorting before all the others) does
	// not displace a held one.
	newer := Entry{Namespace: "hog", Name: "a-newer", Bearer: bearer}
	data, left := Layout(full, append(hog, newer))
	if _, ok := data[newer.Key()]; ok || len(data) != len(full) || len(left) != 2 || !slices.Contains(left, newer) {
		t.Errorf("a newer entry of the same namespace: held %v, %d held, %d left out", ok, len(data), len(left))
	}

	// Another namespace's entry, as large as any and longer than the room
	// left, gets in, in place of the hog's.
	victim := Entry{Namespace: "victim", Name: "the-victims-worker", Bearer: bearer}
	if room := MaxShardBytes - Used(full); EntryBytes(victim.Key(), victim.Bearer) <= room {
		t.Fatalf("the victim's entry fits in the room left (%d bytes)", room)
	}
	data, left = Layout(full, append(hog, victim))
	if _, ok := data[victim.Key()]; !ok {
		t.Fatal("the other namespace's mapping is left out")
	}
	for _, e := range left {
		if e.Namespace != "hog" {
			t.Errorf("%s/%s is left out", e.Namespace, e.Name)
		}
	}
	if Used(data) > MaxShardBytes {
		t.Errorf("the layout holds %d bytes", Used(data))
	}
}

func TestKey(t *testing.T) {
	if got := Key("team-a", "worker.v1"); got != "team-a.worker.v1" {
		t.Errorf("Key = %q", got)
	}
	long := strings.Repeat("n", 253)
	k := Key("team-a", long)
	if !strings.HasPrefix(k, "team-a._") || len(k) > maxKeyBytes || k == Key("team-a", long[1:]) {
		t.Errorf("the key of a long name: %q", k)
	}
	for _, k := range []string{Key("team-a", "w"), k} {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			t.Errorf("%q is no key of a Secret: %v", k, errs)
		}
		if NamespaceOfKey(k) != "team-a" {
			t.Errorf("the namespace of %q: %q", k, NamespaceOfKey(k))
		}
	}
}

func TestShardNames(t *testing.T) {
	for i, name := range SecretNames() {
		if got, ok := ShardOfName(name); !ok || got != i {
			t.Errorf("ShardOfName(%q) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{"playground-worker-bearers-64", "playground-worker-bearers-7", "playground-agent-ca", NamePrefix + "-1"} {
		if _, ok := ShardOfName(name); ok {
			t.Errorf("%q is taken for a shard", name)
		}
	}
	if i := ShardOf("team-a", "worker"); i < 0 || i >= Shards || i != ShardOf("team-a", "worker") {
		t.Errorf("ShardOf = %d", i)
	}
}

func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		value, want, err string
	}{
		{"token\n", "token", ""},
		{"  a.b-c_d~e+f/g=  ", "a.b-c_d~e+f/g=", ""},
		{"", "", "no bearer"},
		{" \n\t", "", "no bearer"},
		{strings.Repeat("x", MaxBearerBytes), strings.Repeat("x", MaxBearerBytes), ""},
		{strings.Repeat("x", MaxBearerBytes+1), "", "at most 4096"},
		{"two words", "", "no visible ASCII"},
		{"line\r\nInjected: header", "", "no visible ASCII"},
		{"caf\xc3\xa9", "", "no visible ASCII"},
	} {
		got, err := Bearer([]byte(tc.value))
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Bearer(%q) = %q, %v; want %q", tc.value, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Bearer(%q): %v, want an error saying %q", tc.value, err, tc.err)
		}
	}
	if _, err := Bearer(nil); !errors.Is(err, ErrNoBearer) {
		t.Errorf("Bearer(nil): %v", err)
	}
}
