//go:build !linux

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

package oci

import (
	"context"
	"errors"

	"github.com/playground-dev/playground/hostagent/backend"
)

// ErrUnsupported is New's error on a system other than Linux.
var ErrUnsupported = errors.New("the oci backend runs on Linux only (runc, namespaces, cgroups); on FreeBSD the agent serves the jail backend")

// Backend stands in for the Linux backend so that code naming it builds
// everywhere; New never returns one.
type Backend struct {
	backend.Backend
	backend.Prober
	backend.StartCounter
	backend.Dialer
	backend.WorkerSupervisor
	backend.StorageReporter
	backend.Isolator
	backend.Builder
	backend.WarmPool
}

// New fails: see ErrUnsupported.
func New(Options) (*Backend, error) { return nil, ErrUnsupported }

// StopAll fails: see ErrUnsupported.
func (*Backend) StopAll(context.Context) error { return ErrUnsupported }

// DestroyAll fails: see ErrUnsupported.
func (*Backend) DestroyAll(context.Context) error { return ErrUnsupported }

// InspectPile fails: see ErrUnsupported.
func (*Backend) InspectPile(string, func(dir string) error) error { return ErrUnsupported }

// HasIPv6Route is false off Linux: there is no oci backend to give IPv6.
func HasIPv6Route() bool { return false }
