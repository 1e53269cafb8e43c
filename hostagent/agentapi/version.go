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

package agentapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is a version of the agent protocol, MAJOR.MINOR. Until the
// first release there is one, Current; Check is how the two ends of a
// call make sure they speak it. Peers of one Major are to understand each
// other (a newer minor would add only what a peer of an older one may
// ignore); a peer of another Major is refused.
type Version struct {
	Major, Minor int
}

// Current is the version this package speaks.
var Current = Version{Major: 1, Minor: 0}

// NodeAudience is the token audience of the agent of node: a gateway
// presents a token of its ServiceAccount bound to it, so a token one
// agent receives is useless against any other.
func NodeAudience(node string) string { return "playground.dev/agent/" + node }

// VersionHeader carries the sender's protocol version on every request
// and answer; the Lease annotation agentlease.AnnotationProtocol carries
// the agent's. A request without it is refused.
const VersionHeader = "Playground-Agent-Protocol"

func (v Version) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// ParseVersion reads "MAJOR.MINOR".
func ParseVersion(s string) (Version, error) {
	maj, mnr, ok := strings.Cut(s, ".")
	if ok {
		a, err1 := strconv.ParseUint(maj, 10, 16)
		b, err2 := strconv.ParseUint(mnr, 10, 16)
		if err1 == nil && err2 == nil {
			return Version{Major: int(a), Minor: int(b)}, nil
		}
	}
	return Version{}, fmt.Errorf("agent protocol version %q is not MAJOR.MINOR", s)
}

// Check accepts a peer that advertises protocol (a VersionHeader, or an
// agent's Lease annotation) if it speaks this side's major version; it
// refuses one that names no version, an unreadable one or another major,
// with an error that says what to do.
func Check(protocol string) error {
	if protocol == "" {
		return errors.New("the peer names no agent protocol version: run a gateway and agents of the same release")
	}
	v, err := ParseVersion(protocol)
	if err != nil {
		return err
	}
	if v.Major != Current.Major {
		return &MajorMismatchError{Peer: v}
	}
	return nil
}

// MajorMismatchError refuses a peer of another major version.
type MajorMismatchError struct{ Peer Version }

func (e *MajorMismatchError) Error() string {
	newer := "this side"
	if e.Peer.Major > Current.Major {
		newer = "the other side"
	}
	return fmt.Sprintf("agent protocol %s is not spoken here (this side speaks %d.x; %s is newer): run a gateway and agents of releases that share a major protocol version", e.Peer, Current.Major, newer)
}
