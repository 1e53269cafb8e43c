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

package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestResult(t *testing.T) {
	boom := errors.New("boom")
	stalled := Stall("Why", "needs a human")
	for _, tc := range []struct {
		name    string
		err     error
		want    ctrl.Result
		wantErr bool
		settled bool
	}{
		{"nil", nil, ctrl.Result{}, false, true},
		{"stalled", stalled, ctrl.Result{}, false, true},
		{"wrapped stalled", fmt.Errorf("phase: %w", stalled), ctrl.Result{}, false, true},
		{"waiting", Wait(2*time.Second, "cache"), ctrl.Result{RequeueAfter: 2 * time.Second}, false, false},
		{"shortest wait", errors.Join(Wait(2*time.Second, "a"), Wait(time.Second, "b"), stalled), ctrl.Result{RequeueAfter: time.Second}, false, false},
		{"error", boom, ctrl.Result{}, true, false},
		{"error beats waiting and stalled", errors.Join(stalled, Wait(time.Second, "a"), boom), ctrl.Result{}, true, false},
		{"recheck", Recheck(5*time.Second, "later"), ctrl.Result{RequeueAfter: 5 * time.Second}, false, true},
		{"recheck and stalled", errors.Join(stalled, Recheck(5*time.Second, "later")), ctrl.Result{RequeueAfter: 5 * time.Second}, false, true},
		{"recheck and waiting", errors.Join(Recheck(time.Second, "later"), Wait(2*time.Second, "a")), ctrl.Result{RequeueAfter: time.Second}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Result(tc.err)
			if res != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Result(%v) = %v, %v; want %v, error %v", tc.err, res, err, tc.want, tc.wantErr)
			}
			if err != nil && !errors.Is(err, boom) {
				t.Errorf("Result lost the error: %v", err)
			}
			if got := Settled(tc.err); got != tc.settled {
				t.Errorf("Settled(%v) = %v, want %v", tc.err, got, tc.settled)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ready := metav1.Condition{Status: metav1.ConditionFalse, Reason: "Waiting", Message: "for the sandbox"}
	for _, tc := range []struct {
		name        string
		progressing bool
		err         error
		// Status and reason of Ready, Reconciling and Stalled ("" when absent).
		want [3]string
	}{
		{"settled", false, nil, [3]string{"False/Waiting", "", ""}},
		{"progressing", true, nil, [3]string{"False/Waiting", "True/Waiting", ""}},
		{"stalled", true, Stall("BackendImmutable", "cannot"), [3]string{"False/BackendImmutable", "", "True/BackendImmutable"}},
		{"error", false, errors.New("boom"), [3]string{"False/Waiting", "True/" + ReasonError, ""}},
		{"waiting only", false, Wait(time.Second, "cache"), [3]string{"False/Waiting", "True/" + ReasonWaiting, ""}},
		{"stalled among errors", false, errors.Join(errors.New("boom"), Stall("X", "y")), [3]string{"False/X", "", "True/X"}},
		{"recheck only", false, Recheck(time.Second, "later"), [3]string{"False/Waiting", "", ""}},
		{"recheck and progressing", true, Recheck(time.Second, "later"), [3]string{"False/Waiting", "True/Waiting", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := []metav1.Condition{
				{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "Old"},
				{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Old"},
			}
			Summarize(&conds, 7, ready, tc.progressing, tc.err)
			var got [3]string
			for i, typ := range []string{"Ready", "Reconciling", "Stalled"} {
				if c := meta.FindStatusCondition(conds, typ); c != nil {
					got[i] = string(c.Status) + "/" + c.Reason
					if c.ObservedGeneration != 7 {
						t.Errorf("%s: observedGeneration %d, want 7", typ, c.ObservedGeneration)
					}
				}
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// ApplyConditions picks what one field manager owns, in a stable order,
// with the transition times as they are.
func TestApplyConditions(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	conds := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "m", ObservedGeneration: 2, LastTransitionTime: since},
		{Type: "Provisioned", Status: metav1.ConditionTrue, Reason: "Provisioned", LastTransitionTime: since},
		{Type: "Bound", Status: metav1.ConditionFalse, Reason: "NoNode", LastTransitionTime: since},
	}
	got := ApplyConditions(conds, "Reconciling", "Ready", "Bound")
	if len(got) != 2 || *got[0].Type != "Bound" || *got[1].Type != "Ready" {
		t.Fatalf("ApplyConditions = %+v, want Bound and Ready", got)
	}
	r := got[1]
	if *r.Status != metav1.ConditionTrue || *r.Reason != "Ready" || *r.Message != "m" || *r.ObservedGeneration != 2 || !r.LastTransitionTime.Equal(&since) {
		t.Errorf("Ready = %+v, want it as it was", r)
	}
}

// ConditionsHold compares what the conditions of the given types say,
// transition times apart; one present on a side only is a change.
func TestConditionsHold(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "m", ObservedGeneration: 2, LastTransitionTime: then}
	other := metav1.Condition{Type: "Provisioned", Status: metav1.ConditionFalse, Reason: "Agent"}
	with := func(f func(*metav1.Condition)) []metav1.Condition {
		c := ready
		f(&c)
		return []metav1.Condition{other, c}
	}
	have := []metav1.Condition{ready, other}
	for _, tc := range []struct {
		name string
		want []metav1.Condition
		hold bool
	}{
		{"the same", []metav1.Condition{ready}, true},
		{"a new transition time", with(func(c *metav1.Condition) { c.LastTransitionTime = metav1.Now() }), true},
		{"another status", with(func(c *metav1.Condition) { c.Status = metav1.ConditionFalse }), false},
		{"another reason", with(func(c *metav1.Condition) { c.Reason = "Other" }), false},
		{"another message", with(func(c *metav1.Condition) { c.Message = "n" }), false},
		{"another generation", with(func(c *metav1.Condition) { c.ObservedGeneration = 3 }), false},
		{"dropped", []metav1.Condition{other}, false},
		{"added", []metav1.Condition{ready, {Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Waiting"}}, false},
	} {
		if got := ConditionsHold(have, tc.want, "Ready", "Reconciling"); got != tc.hold {
			t.Errorf("%s: ConditionsHold = %v, want %v", tc.name, got, tc.hold)
		}
	}
	if u := Untimed(have); len(u) != 2 || !u[0].LastTransitionTime.IsZero() || have[0].LastTransitionTime.IsZero() {
		t.Errorf("Untimed(have) = %+v: want every condition, without times, have untouched", u)
	}
}
