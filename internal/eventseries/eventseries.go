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

// Package eventseries lets repeated Events about an object merge into one
// Event with a series, as the Events API intends.
//
// client-go's events broadcaster counts an Event into the series of an
// earlier one when their type, reason, action, reporter and regarding and
// related references are the same. A reference carries the object's
// resourceVersion, which every status write moves: so the three Warnings
// of a failure retried three times, a status write apart, were three
// Events, not one Event with a count of three. The recorder here makes
// the references without a resourceVersion (an Event is about the object,
// not one version of it; its UID still tells a re-created object apart).
package eventseries

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Recorder returns r, recording Events whose references carry no
// resourceVersion, so that repeated ones merge into a series.
func Recorder(r recorder.EventRecorder) recorder.EventRecorder {
	return seriesRecorder{r}
}

type seriesRecorder struct{ r recorder.EventRecorder }

func (s seriesRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	s.r.Eventf(unversioned(regarding), unversioned(related), eventtype, reason, action, note, args...)
}

func (s seriesRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	s.r.AnnotatedEventf(unversioned(regarding), unversioned(related), annotations, eventtype, reason, action, note, args...)
}

// unversioned is a copy of o without a resourceVersion, or o itself when
// it has none (or is not an object with metadata).
func unversioned(o runtime.Object) runtime.Object {
	if o == nil {
		return nil
	}
	if v := reflect.ValueOf(o); v.Kind() == reflect.Pointer && v.IsNil() {
		return o
	}
	m, err := meta.Accessor(o)
	if err != nil || m.GetResourceVersion() == "" {
		return o
	}
	c := o.DeepCopyObject()
	if cm, err := meta.Accessor(c); err == nil {
		cm.SetResourceVersion("")
	}
	return c
}
