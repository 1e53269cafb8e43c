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

// Package reconcile holds what the reconcilers share about the outcome of a
// pass: typed errors for expected states (stalled on a human, waiting on
// the world), the controller-runtime result they map to, and the kstatus
// conditions (Ready, Reconciling, Stalled) derived from them in one place,
// written with server-side apply by the field manager that owns them.
package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// Reconciling reasons of a pass that did not finish.
const (
	// ReasonError: the pass failed and is retried with backoff.
	ReasonError = "RetryingAfterError"
	// ReasonWaiting: the pass waits for the world to catch up.
	ReasonWaiting = "Waiting"
)

// StalledError says that progress needs a change by a human: retrying
// cannot help, so the object reports Stalled and waits for a change.
type StalledError struct {
	Reason  string
	Message string
}

func (e *StalledError) Error() string { return e.Message }

// Stall returns a StalledError.
func Stall(reason, format string, args ...any) error {
	return &StalledError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// WaitingError says that the world has to catch up (a cache behind a write,
// a conflicting writer): the pass is retried after a bounded delay instead
// of the exponential backoff, and nothing is logged as an error.
type WaitingError struct {
	After   time.Duration
	Message string
}

func (e *WaitingError) Error() string { return e.Message }

// Wait returns a WaitingError.
func Wait(after time.Duration, format string, args ...any) error {
	return &WaitingError{After: after, Message: fmt.Sprintf(format, args...)}
}

// RecheckError says that the pass settled, but that what it observed
// should be looked at again later (a view of the API server that may
// trail the reconciler's own for a moment): it requeues after its delay
// without marking the object as progressing or failing.
type RecheckError struct {
	After   time.Duration
	Message string
}

func (e *RecheckError) Error() string { return e.Message }

// Recheck returns a RecheckError.
func Recheck(after time.Duration, format string, args ...any) error {
	return &RecheckError{After: after, Message: fmt.Sprintf(format, args...)}
}

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// Settled reports whether a pass that returned err reached a state it can
// report as the observed generation: it succeeded, stalled, or only asked
// for a recheck.
func Settled(err error) bool {
	for _, e := range leaves(err) {
		var s *StalledError
		var r *RecheckError
		if !errors.As(e, &s) && !errors.As(e, &r) {
			return false
		}
	}
	return true
}

// withoutRechecks is err without its RecheckErrors, which say nothing of
// the object's state.
func withoutRechecks(err error) error {
	var kept []error
	for _, e := range leaves(err) {
		var r *RecheckError
		if !errors.As(e, &r) {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// Result maps the error of a pass to what controller-runtime expects:
// stalled errors end the pass (a watched change starts the next), waiting
// and recheck errors requeue after their delay, anything else is returned
// for the rate-limited retry.
func Result(err error) (ctrl.Result, error) {
	var res ctrl.Result
	var other []error
	after := func(d time.Duration) {
		if res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	}
	for _, e := range leaves(err) {
		var s *StalledError
		var w *WaitingError
		var r *RecheckError
		switch {
		case errors.As(e, &s):
		case errors.As(e, &w):
			after(w.After)
		case errors.As(e, &r):
			after(r.After)
		default:
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		return ctrl.Result{}, errors.Join(other...)
	}
	return res, nil
}

// Summarize sets the kstatus conditions of an object from the Ready summary
// its phases reached and the error of the pass:
//   - a StalledError: Stalled=True with its reason, Ready=False with the
//     same, no Reconciling;
//   - any other error: Reconciling=True, reason RetryingAfterError (or
//     Waiting when every error is a WaitingError), message the error;
//   - progressing: Reconciling=True with Ready's reason and message;
//   - otherwise neither Reconciling nor Stalled, so that kstatus reads
//     Ready alone.
//
// A RecheckError counts as no error. Every condition set carries
// generation as its observedGeneration.
func Summarize(conds *[]metav1.Condition, generation int64, ready metav1.Condition, progressing bool, err error) {
	err = withoutRechecks(err)
	ready.Type = playgroundv1alpha1.ReadyCondition
	ready.ObservedGeneration = generation
	var stalled *StalledError
	for _, e := range leaves(err) {
		if errors.As(e, &stalled) {
			break
		}
	}
	switch {
	case stalled != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, stalled.Reason, stalled.Message
		meta.SetStatusCondition(conds, metav1.Condition{Type: playgroundv1alpha1.StalledCondition, Status: metav1.ConditionTrue,
			Reason: stalled.Reason, Message: stalled.Message, ObservedGeneration: generation})
		meta.RemoveStatusCondition(conds, playgroundv1alpha1.ReconcilingCondition)
	case err != nil:
		meta.RemoveStatusCondition(conds, playgroundv1alpha1.StalledCondition)
		reason := ReasonWaiting
		for _, e := range leaves(err) {
			var w *WaitingError
			if !errors.As(e, &w) {
				reason = ReasonError
			}
		}
		meta.SetStatusCondition(conds, metav1.Condition{Type: playgroundv1alpha1.ReconcilingCondition, Status: metav1.ConditionTrue,
			Reason: reason, Message: err.Error(), ObservedGeneration: generation})
	case progressing:
		meta.RemoveStatusCondition(conds, playgroundv1alpha1.StalledCondition)
		meta.SetStatusCondition(conds, metav1.Condition{Type: playgroundv1alpha1.ReconcilingCondition, Status: metav1.ConditionTrue,
			Reason: ready.Reason, Message: ready.Message, ObservedGeneration: generation})
	default:
		meta.RemoveStatusCondition(conds, playgroundv1alpha1.StalledCondition)
		meta.RemoveStatusCondition(conds, playgroundv1alpha1.ReconcilingCondition)
	}
	meta.SetStatusCondition(conds, ready)
}

// ApplyConditions returns, as apply configurations sorted by type, the
// conditions of conds whose type is one of owned: what one field manager
// owns of a status's conditions. An owned type absent from conds is left
// out, so that the apply removes it; the others' conditions are not
// touched. Each keeps the lastTransitionTime it has in conds, where
// meta.SetStatusCondition keeps it while the status holds.
func ApplyConditions(conds []metav1.Condition, owned ...string) []*metav1ac.ConditionApplyConfiguration {
	var out []*metav1ac.ConditionApplyConfiguration
	for _, c := range conds {
		if !slices.Contains(owned, c.Type) {
			continue
		}
		out = append(out, metav1ac.Condition().
			WithType(c.Type).
			WithStatus(c.Status).
			WithReason(c.Reason).
			WithMessage(c.Message).
			WithObservedGeneration(c.ObservedGeneration).
			WithLastTransitionTime(c.LastTransitionTime))
	}
	slices.SortFunc(out, func(a, b *metav1ac.ConditionApplyConfiguration) int { return strings.Compare(*a.Type, *b.Type) })
	return out
}

// Untimed returns the conditions of conds whose type is one of types (all
// of them, in their order, when no type is given; otherwise in the order
// of types) without their transition times: what a status says, as a pass
// that runs over a lagging cache computes it anew with times of its own.
func Untimed(conds []metav1.Condition, types ...string) []metav1.Condition {
	if len(types) == 0 {
		out := slices.Clone(conds)
		for i := range out {
			out[i].LastTransitionTime = metav1.Time{}
		}
		return out
	}
	var out []metav1.Condition
	for _, typ := range types {
		if c := meta.FindStatusCondition(conds, typ); c != nil {
			u := *c
			u.LastTransitionTime = metav1.Time{}
			out = append(out, u)
		}
	}
	return out
}

// ConditionsHold reports whether have already shows the conditions of the
// given types as want has them: each type in both or in neither, with the
// same status, reason, message and observed generation. Transition times
// are not compared (Untimed). A reconciler whose status holds skips its
// apply: every event of an object and every resync bring it back, and an
// unchanged apply is a request to the API server all the same. A
// condition want drops (Reconciling, once Ready) counts as a change.
func ConditionsHold(have, want []metav1.Condition, types ...string) bool {
	return slices.Equal(Untimed(have, types...), Untimed(want, types...))
}

// ApplyUsage is u as an apply configuration (a Sandbox's or Tenant's
// status.usage, every field of it).
func ApplyUsage(u *playgroundv1alpha1.UsageStatus) *playgroundv1alpha1ac.UsageStatusApplyConfiguration {
	ac := playgroundv1alpha1ac.UsageStatus().WithCPUMilliseconds(u.CPUMilliseconds).WithMemoryPeakBytes(u.MemoryPeakBytes).
		WithMemoryMiBSeconds(u.MemoryMiBSeconds).WithStorageBytes(u.StorageBytes).WithJobMilliseconds(u.JobMilliseconds).WithSampleTime(u.SampleTime)
	if u.PeriodStart != nil {
		ac = ac.WithPeriodStart(*u.PeriodStart).WithPeriodCPUMilliseconds(u.PeriodCPUMilliseconds)
	}
	if u.ExhaustedUntil != nil {
		ac = ac.WithExhaustedUntil(*u.ExhaustedUntil)
	}
	return ac
}
