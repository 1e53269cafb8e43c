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

package jobs

import (
	"fmt"
	"time"

	"github.com/playground-dev/playground/hostagent/bounds"
)

// Limits bounds the manager. The zero value of a field means its default.
type Limits struct {
	// ActivePerTenant and ActivePerAgent bound running and cancelling jobs.
	ActivePerTenant int
	ActivePerAgent  int
	// RetainedPerTenant and RetainedPerAgent bound jobs that exist in the
	// manager at all: active ones and terminal ones not yet recycled.
	RetainedPerTenant int
	RetainedPerAgent  int

	// RingBytes and RingChunks bound the output kept per job.
	RingBytes  int
	RingChunks int
	// ChunkBytes is the largest chunk: small writes to one stream are
	// coalesced up to it and larger writes split at it. Keeping it well below
	// RingBytes makes eviction fine-grained.
	ChunkBytes int

	// TerminalTTL is how long a terminal job is kept without being polled.
	TerminalTTL time.Duration
	// SweepInterval is how often expired and acknowledged jobs are recycled
	// in the background, releasing their rings.
	SweepInterval time.Duration

	// DefaultPollBytes is a poll's page size when the caller names none;
	// MaxPollBytes caps what a caller may ask for.
	DefaultPollBytes int
	MaxPollBytes     int
	// MaxPollWait caps a long poll.
	MaxPollWait time.Duration
}

// Defaults from DESIGN.md section 4, and the manager's own choices for the
// bounds the design leaves open.
const (
	DefaultActivePerTenant   = 8
	DefaultActivePerAgent    = 32
	DefaultRetainedPerTenant = 8
	DefaultRetainedPerAgent  = 64
	DefaultRingBytes         = 4 << 20
	DefaultRingChunks        = 1024
	DefaultChunkBytes        = 64 << 10
	DefaultTerminalTTL       = time.Hour
	DefaultSweepInterval     = time.Minute
	DefaultPollBytes         = 1 << 20
	DefaultMaxPollBytes      = bounds.MaxPollBytes
	DefaultMaxPollWait       = bounds.MaxPollWait
)

// DefaultLimits returns the defaults.
func DefaultLimits() Limits {
	return Limits{}.withDefaults()
}

func (l Limits) withDefaults() Limits {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&l.ActivePerTenant, DefaultActivePerTenant)
	setInt(&l.ActivePerAgent, DefaultActivePerAgent)
	setInt(&l.RetainedPerTenant, DefaultRetainedPerTenant)
	setInt(&l.RetainedPerAgent, DefaultRetainedPerAgent)
	setInt(&l.RingBytes, DefaultRingBytes)
	setInt(&l.RingChunks, DefaultRingChunks)
	// A ring smaller than the default chunk gets chunks no larger than itself.
	setInt(&l.ChunkBytes, min(DefaultChunkBytes, l.RingBytes))
	setDur(&l.TerminalTTL, DefaultTerminalTTL)
	setDur(&l.SweepInterval, DefaultSweepInterval)
	setInt(&l.MaxPollBytes, DefaultMaxPollBytes)
	setInt(&l.DefaultPollBytes, min(DefaultPollBytes, l.MaxPollBytes))
	setDur(&l.MaxPollWait, DefaultMaxPollWait)
	return l
}

// maxRingBytes keeps ring positions and chunk sizes far from int overflow on
// any platform.
const maxRingBytes = 1 << 30

func (l Limits) validate() error {
	pos := []struct {
		name string
		v    int64
	}{
		{"ActivePerTenant", int64(l.ActivePerTenant)},
		{"ActivePerAgent", int64(l.ActivePerAgent)},
		{"RetainedPerTenant", int64(l.RetainedPerTenant)},
		{"RetainedPerAgent", int64(l.RetainedPerAgent)},
		{"RingBytes", int64(l.RingBytes)},
		{"RingChunks", int64(l.RingChunks)},
		{"ChunkBytes", int64(l.ChunkBytes)},
		{"TerminalTTL", int64(l.TerminalTTL)},
		{"SweepInterval", int64(l.SweepInterval)},
		{"DefaultPollBytes", int64(l.DefaultPollBytes)},
		{"MaxPollBytes", int64(l.MaxPollBytes)},
		{"MaxPollWait", int64(l.MaxPollWait)},
	}
	for _, f := range pos {
		if f.v <= 0 {
			return fmt.Errorf("jobs: limit %s must be positive, got %d", f.name, f.v)
		}
	}
	switch {
	case l.RingBytes > maxRingBytes:
		return fmt.Errorf("jobs: RingBytes %d exceeds %d", l.RingBytes, maxRingBytes)
	case l.ChunkBytes > l.RingBytes:
		return fmt.Errorf("jobs: ChunkBytes %d exceeds RingBytes %d", l.ChunkBytes, l.RingBytes)
	case l.DefaultPollBytes > l.MaxPollBytes:
		return fmt.Errorf("jobs: DefaultPollBytes %d exceeds MaxPollBytes %d", l.DefaultPollBytes, l.MaxPollBytes)
	case l.MaxPollBytes > maxRingBytes:
		return fmt.Errorf("jobs: MaxPollBytes %d exceeds %d", l.MaxPollBytes, maxRingBytes)
	}
	return nil
}
