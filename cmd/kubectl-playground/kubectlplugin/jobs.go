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

package kubectlplugin

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

func (x *cli) jobsCommand() *cobra.Command {
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "jobs NAME",
		Short: "The tenant's open session handles and jobs, with command, state and age",
		Long: `The tenant's open session handles and the jobs it can still poll or cancel
(running, or ended and not yet read to the end or expired), oldest first, as
its sandbox's agent holds them: what counts against the tenant's bounds of
handles and retained jobs. A job's command is shown up to its first 200
bytes. An agent that lost its job IDs finds them here; cancel one with the
job_cancel tool.

` + execWho,
		Example: `  kubectl playground jobs alice
  kubectl playground jobs alice -o json`,
		ValidArgsFunction: x.completeTenants,
		Args:              name("tenant"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := x.checkOutput(cmd); err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := x.reachSandbox(ctx, args[0], &af)
			if err != nil {
				return err
			}
			act, err := s.agent.Activity(ctx, s.tenant, s.sandboxID)
			if err != nil {
				return fmt.Errorf("listing tenant %s's handles and jobs: %w", s.tenant, err)
			}
			if x.output != "" {
				return x.print(act)
			}
			return x.printActivity(act, time.Now())
		},
	}
	outputFlag(cmd, &x.output, "the handles and jobs")
	af.addReach(cmd)
	return cmd
}

// printActivity prints a tenant's handles and jobs as two tables.
func (x *cli) printActivity(act agentapi.Activity, now time.Time) error {
	age := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return duration.HumanDuration(now.Sub(t))
	}
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	if len(act.Handles) == 0 {
		fmt.Fprintln(w, "No open session handles.")
	} else {
		fmt.Fprintln(w, "HANDLE\tAGE\tIDLE\tEXPIRES IN")
		for _, h := range act.Handles {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", h.ID, age(h.Opened), age(h.LastUsed), duration.HumanDuration(h.Expires.Sub(now)))
		}
	}
	fmt.Fprintln(w)
	if len(act.Jobs) == 0 {
		fmt.Fprintln(w, "No jobs.")
		return w.Flush()
	}
	fmt.Fprintln(w, "JOB\tSTATE\tAGE\tRESULT\tINPUT\tCOMMAND")
	for _, j := range act.Jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.State, age(j.StartedAt), jobResult(j.Result), jobInput(j), cmpOr(oneLine(j.Command), "-"))
	}
	return w.Flush()
}

// jobResult sums up how a job ended, "-" while it runs.
func jobResult(r *agentapi.JobResult) string {
	switch {
	case r == nil:
		return "-"
	case r.TimedOut:
		return "timed out"
	case r.OOMKilled:
		return "out of memory"
	case r.Killed:
		return "cancelled"
	case r.Signal != "":
		return r.Signal
	case r.ExitCode >= 0:
		return "exit " + strconv.Itoa(r.ExitCode)
	}
	return "failed"
}

// jobInput says how a job takes input: a terminal of its size, an open
// input, or none.
func jobInput(j agentapi.JobInfo) string {
	switch {
	case j.TTY != nil:
		return fmt.Sprintf("tty %dx%d", j.TTY.Cols, j.TTY.Rows)
	case j.Input:
		return "open"
	}
	return "-"
}
