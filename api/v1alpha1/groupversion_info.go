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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "playground.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name the generated apply
	// configurations use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the kinds of this package with a scheme. It
	// is apimachinery's, as in k8s.io/api: an API package stays importable
	// without controller-runtime, whose scheme.Builder is deprecated for it.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// register adds kinds to SchemeBuilder; each kind's file calls it in init.
func register(objects ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objects...)
		return nil
	})
}
