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

// Package v1alpha1 holds the Playground API: Tenant, Sandbox, WorkerMapping
// and FacultyBundle in the group playground.dev.
//
// The apply configurations in applyconfiguration/ are what the manager and
// the agents write status with (server-side apply, typed).
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=playground.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "playground.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name the generated apply
	// configurations use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
