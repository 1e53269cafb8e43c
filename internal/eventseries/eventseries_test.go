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

package eventseries

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// sink keeps the Events the broadcaster writes by name, as the API server
// does: a series is a patch of the Event that began it.
type sink struct {
	mu      sync.Mutex
	events  map[string]*eventsv1.Event
	written chan struct{}
}

func (s *sink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.events[e.Name]; ok {
		return nil, apierrors.NewAlreadyExists(eventsv1.Resource("events"), e.Name)
	}
	s.events[e.Name] = e.DeepCopy()
	s.written <- struct{}{}
	return e, nil
}

func (s *sink) Update(_ context.Context, _ *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, apierrors.NewMethodNotSupported(eventsv1.Resource("events"), "update")
}

func (s *sink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.events[e.Name]; !ok {
		return nil, apierrors.NewNotFound(eventsv1.Resource("events"), e.Name)
	}
	s.events[e.Name] = e.DeepCopy()
	s.written <- struct{}{}
	return e, nil
}

type eventRecorder interface {
	events.EventRecorder
	events.AnnotatedEventRecorder
}

// TestRepeatedWarningsMergeIntoASeries: the same Warning about an object
// three times, its resourceVersion moved by a status write in between,
// is one Event with a series. (The broadcaster writes the second
// occurrence as the series' start and counts later ones in its cache,
// writing the count at its next heartbeat, as the Events API intends.)
func TestRepeatedWarningsMergeIntoASeries(t *testing.T) {
	s := &sink{events: map[string]*eventsv1.Event{}, written: make(chan struct{}, 16)}
	b := events.NewBroadcaster(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	raw, ok := b.NewRecorder(scheme.Scheme, "test-controller").(eventRecorder)
	if !ok {
		t.Fatal("the events recorder records no annotated events")
	}
	r := Recorder(raw)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	record := func(rv string, annotated bool) {
		pod.ResourceVersion = rv
		if annotated {
			r.AnnotatedEventf(pod, nil, nil, corev1.EventTypeWarning, "BackendFailed", "Provision", "memory limit %s is too small", "1Ki")
		} else {
			r.Eventf(pod, nil, corev1.EventTypeWarning, "BackendFailed", "Provision", "memory limit %s is too small", "1Ki")
		}
	}
	// One at a time, as a retried failure records them: each write lands
	// before the next Event.
	for i, rv := range []string{"1", "2"} {
		record(rv, i == 1)
		select {
		case <-s.written:
		case <-time.After(30 * time.Second):
			t.Fatalf("event %d was not written", i+1)
		}
	}
	record("3", false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) != 1 {
		t.Fatalf("%d Events, want one with a series", len(s.events))
	}
	for _, e := range s.events {
		if e.Series == nil || e.Series.Count < 2 || e.Regarding.ResourceVersion != "" || e.Regarding.UID != "u1" {
			t.Fatalf("event %+v, series %+v: want a series about UID u1 without a resourceVersion", e.Regarding, e.Series)
		}
	}
	if pod.ResourceVersion != "3" {
		t.Fatalf("the recorded object changed: resourceVersion %q", pod.ResourceVersion)
	}
}
