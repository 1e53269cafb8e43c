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

package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report is what Verify found in a stream.
type Report struct {
	// Records is how many it read; Chains how many chains they belong to.
	Records, Chains int
	// Announced are the gaps a sink said it left (Missed), as "chain
	// c: records a-b"; they are not failures.
	Announced []string
}

// Problem is a stream that does not hold together: a record altered,
// removed, reordered, or not a record.
type Problem struct {
	Line int
	Why  string
}

func (p *Problem) Error() string { return fmt.Sprintf("line %d: %s", p.Line, p.Why) }

// MaxLine bounds a record's line.
const MaxLine = 1 << 20

// Verify reads JSON-line records (the files of a rotated sink in order,
// oldest first, or a webhook's stream) and checks each chain: every
// record's hash is its content's, its prev the hash of the record before
// it in its chain, its seq the next one; a gap is allowed only where the
// record after it says the sink dropped exactly that many (Missed).
// A chain may start anywhere (a rotated file dropped the oldest), but
// never go back.
func Verify(r io.Reader) (Report, error) {
	type tail struct {
		seq  uint64
		hash string
	}
	chains := map[string]*tail{}
	var rep Report
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var rec Record
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return rep, &Problem{Line: line, Why: "not an audit record: " + err.Error()}
		}
		rep.Records++
		if rec.Chain == "" || rec.Seq == 0 {
			return rep, &Problem{Line: line, Why: "a record without its chain and place"}
		}
		if got := rec.hash(); got != rec.Hash {
			return rep, &Problem{Line: line, Why: fmt.Sprintf("record %d of chain %s was altered: its content hashes to %s, not the %s it carries", rec.Seq, rec.Chain, got[:12], short(rec.Hash))}
		}
		t, seen := chains[rec.Chain]
		if !seen {
			chains[rec.Chain] = &tail{seq: rec.Seq, hash: rec.Hash}
			rep.Chains++
			continue
		}
		switch want := t.seq + 1; {
		case rec.Seq <= t.seq:
			return rep, &Problem{Line: line, Why: fmt.Sprintf("record %d of chain %s comes after record %d: records were reordered or repeated", rec.Seq, rec.Chain, t.seq)}
		case rec.Seq == want:
			if rec.Prev != t.hash {
				return rep, &Problem{Line: line, Why: fmt.Sprintf("record %d of chain %s does not follow record %d: its prev is %s, the record before has %s", rec.Seq, rec.Chain, t.seq, short(rec.Prev), short(t.hash))}
			}
		case rec.Missed == rec.Seq-want:
			rep.Announced = append(rep.Announced, fmt.Sprintf("chain %s: records %d-%d, dropped by the sink", rec.Chain, want, rec.Seq-1))
		default:
			return rep, &Problem{Line: line, Why: fmt.Sprintf("records %d-%d of chain %s are missing: removed (the sink announced %d dropped)", want, rec.Seq-1, rec.Chain, rec.Missed)}
		}
		t.seq, t.hash = rec.Seq, rec.Hash
	}
	if err := sc.Err(); err != nil {
		return rep, &Problem{Line: line + 1, Why: err.Error()}
	}
	return rep, nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return `""`
	}
	return h
}
