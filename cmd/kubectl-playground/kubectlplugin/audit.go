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
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/playground-dev/playground/internal/audit"
)

func (x *cli) auditCommand() *cobra.Command {
	var file string
	var last int
	cmd := &cobra.Command{
		Use:   "audit NAME [--file FILE]",
		Short: "The tenant's recent tool calls, from an audit trail",
		Long: `The tenant's recent tool calls, newest last, from an audit trail the gateway
(or an agent) wrote: a file of its --audit-log-path, or - for standard input,
where the records a gateway writes to its standard output (the default) can
be piped from its logs. Lines that are no audit record are skipped. Check
that a trail holds together with playground audit verify. With
playground-dev's kubeconfig, its trail (.dev/audit.log) is the default.`,
		Example: `  kubectl logs -n playground-system -l app.kubernetes.io/component=gateway --tail=-1 | kubectl playground audit alice --file -
  kubectl playground audit alice --file ~/.local/state/playground/audit.log`,
		ValidArgsFunction: x.completeTenants,
		Args:              name("tenant"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := x.checkOutput(cmd); err != nil {
				return err
			}
			if file == "" {
				dev, err := x.devCluster()
				if err != nil {
					return err
				}
				if dev == nil || dev.AuditLog == "" {
					return usagef(cmd, "audit needs --file: the trail is where the gateway's --audit-log-path puts it, its standard output by default (pipe `kubectl logs` of the gateway's pods into --file -), a file, or a webhook's store")
				}
				// playground-dev's kubeconfig says where its trail is.
				file = dev.AuditLog
			}
			ns, err := x.ns()
			if err != nil {
				return err
			}
			in := x.env.In
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			recs, err := tenantRecords(in, ns+"/"+args[0], last)
			if err != nil {
				return err
			}
			if x.output != "" {
				return x.print(recs)
			}
			return x.printRecords(recs)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the audit trail: a file, or - for standard input (default: playground-dev's, with its kubeconfig)")
	cmd.Flags().IntVar(&last, "last", 50, "how many of the tenant's latest calls to show")
	outputFlag(cmd, &x.output, "the records")
	return cmd
}

// tenantRecords are the last records of tenant in r.
func tenantRecords(r io.Reader, tenant string, last int) ([]audit.Record, error) {
	var recs []audit.Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), audit.MaxLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec audit.Record
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Chain == "" || rec.Tenant != tenant {
			continue
		}
		recs = append(recs, rec)
		if last > 0 && len(recs) > last {
			recs = recs[1:]
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the audit trail: %w", err)
	}
	return recs, nil
}

// printRecords prints records as a table.
func (x *cli) printRecords(recs []audit.Record) error {
	if len(recs) == 0 {
		fmt.Fprintln(x.out, "No calls of this tenant in the trail.")
		return nil
	}
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tTOOL\tOUTCOME\tDURATION\tIDENTITY\tWHAT")
	for _, r := range recs {
		outcome := r.Outcome
		if r.Code != "" {
			outcome += " (" + r.Code + ")"
		}
		what := cmpOr(oneLine(r.Command), r.Path, r.Job, "-")
		d := time.Duration(r.DurationMS * float64(time.Millisecond)).Round(time.Millisecond)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format(time.DateTime), r.Tool, outcome, d, r.Identity, what)
	}
	return w.Flush()
}
