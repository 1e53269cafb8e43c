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
	"fmt"
	"strconv"
	"strings"
)

// Version is a version of the agent protocol. Peers of the same Major
// understand each other: a newer minor adds what an older peer may
// ignore (a media type it can be asked for, a response field) and never
// changes what an older peer sends or reads. A peer speaks to another of
// an older minor as that minor, and refuses one of another Major.
//
// History:
//   - 1.0: the API as first released: JSON requests and JSON answers.
//   - 1.1: exec and poll may answer as raw bytes after a JSON header
//     (ExecMediaType, PollMediaType), when asked with Accept; exec results
//     and job results carry oom_killed.
//   - 1.2: callers by Kubernetes identity: a trusted gateway with a token
//     bound to the agent's node, or a user whose use of the tenant a
//     SubjectAccessReview allows; permission_denied (403) refuses a user
//     the tenant.
//   - 1.3: the worker relay (WorkerPath): requests to the MCP worker in a
//     tenant's sandbox, passed through byte for byte.
type Version struct {
	Major, Minor int
}

// Current is the version this package speaks.
var Current = Version{Major: 1, Minor: 3}

// V1_0 is the first version, which agents that advertise none speak.
var V1_0 = Version{Major: 1, Minor: 0}

// NodeAudience is the token audience of the agent of node (1.2): a
// gateway presents a token of its ServiceAccount bound to it, so a token
// one agent receives is useless against any other.
func NodeAudience(node string) string { return "playground.dev/agent/" + node }

// VersionHeader carries the sender's protocol version on every request
// and answer; the Lease annotation agentlease.AnnotationProtocol carries
// the agent's. A request without it is from a 1.0 client.
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

// Negotiate returns the version to speak with a peer of version peer: the
// older of the two when the majors agree, else an error that says which
// side to upgrade.
func Negotiate(peer Version) (Version, error) {
	if peer.Major != Current.Major {
		return Version{}, &MajorMismatchError{Peer: peer}
	}
	if peer.Minor < Current.Minor {
		return peer, nil
	}
	return Current, nil
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

// BinaryAnswers reports whether a peer speaking v may be asked for the
// raw-bytes answers of exec and poll (ExecMediaType, PollMediaType).
func (v Version) BinaryAnswers() bool { return v.Major == 1 && v.Minor >= 1 }
