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
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// tenantRow is one tenant at a glance: a row of status and tenant list,
// and what status -o json|yaml prints for each tenant. State says whether
// its sandbox's processes run: the reason of the Sandbox's Running
// condition (Running, IdlePaused, IdleSuspended, IdleStopped, Waking,
// CPULimitReached, Suspended, Stopped).
type tenantRow struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Catalog   string      `json:"catalog"`
	Ready     string      `json:"ready"`
	Reason    string      `json:"reason,omitempty"`
	Suspended bool        `json:"suspended,omitempty"`
	Phase     string      `json:"phase,omitempty"`
	State     string      `json:"state,omitempty"`
	Node      string      `json:"node,omitempty"`
	SandboxID string      `json:"sandboxID,omitempty"`
	Created   metav1.Time `json:"creationTimestamp"`
	// Next says what to do: connect, or what the tenant waits for and
	// where to look.
	Next string `json:"next"`
}

// conditionRow is a condition of one of a tenant's objects (tenant,
// worker mapping, sandbox, node), or a fact about it.
type conditionRow struct {
	Object  string `json:"object"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// facultyRow is one faculty bundle of a tenant's sandbox.
type facultyRow struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	Fingerprint string `json:"fingerprint"`
	NodeBuild   string `json:"nodeBuild"`
	Message     string `json:"message"`
}

// settingsRow is what a tenant asked for that decides how its sandbox
// runs and what it is served.
type settingsRow struct {
	Backend string `json:"backend"`
	// Isolation is what the sandbox runs with (its status), else what the
	// Tenant asks for; empty on backends that offer no choice.
	Isolation string `json:"isolation,omitempty"`
	// Tools is the tool set of catalog sandbox; empty for catalog workers.
	Tools string `json:"tools,omitempty"`
	// Idle is when and how the sandbox is put to sleep: "never", or
	// MODE after DURATION.
	Idle string `json:"idle"`
	// Image is the image the sandbox runs as its system (empty: its
	// node's own), and Digest what the manager resolved it to (empty
	// while it has not); SignedBy the keys that verified its signature,
	// TENANTPOLICY/KEY, comma-separated, where a TenantPolicy names
	// signing keys (a string, so that a row stays comparable).
	Image    string `json:"image,omitempty"`
	Digest   string `json:"digest,omitempty"`
	SignedBy string `json:"signedBy,omitempty"`
}

// tenantStatus is what status NAME -o json|yaml prints.
type tenantStatus struct {
	tenantRow
	Settings   settingsRow    `json:"settings"`
	Conditions []conditionRow `json:"conditions"`
	Faculties  []facultyRow   `json:"faculties,omitempty"`
	// EgressDenials are the latest names and answers the sandbox's
	// resolver refused (Events EgressDenied), newest first.
	EgressDenials []denialRow `json:"egressDenials,omitempty"`
	// Usage is what the sandbox spent, as its agent last wrote it.
	Usage *playgroundv1alpha1.UsageStatus `json:"usage,omitempty"`
}

// denialRow is an EgressDenied Event of the tenant's sandbox.
type denialRow struct {
	Last    time.Time `json:"last"`
	Count   int32     `json:"count"`
	Message string    `json:"message"`
}

// maxDenials bounds the denials status shows.
const maxDenials = 5

// egressDenials are the latest EgressDenied Events of sandbox s.
func (x *cli) egressDenials(ctx context.Context, s *playgroundv1alpha1.Sandbox) []denialRow {
	var list corev1.EventList
	if err := x.c.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingFields{
		"involvedObject.name": s.Name, "reason": playgroundv1alpha1.ReasonEgressDenied,
	}); err != nil {
		return nil
	}
	var rows []denialRow
	for _, e := range list.Items {
		if e.InvolvedObject.UID != s.UID {
			continue
		}
		last, count := e.LastTimestamp.Time, e.Count
		if e.Series != nil {
			last, count = e.Series.LastObservedTime.Time, e.Series.Count
		}
		if last.IsZero() {
			last = e.EventTime.Time
		}
		rows = append(rows, denialRow{Last: last, Count: max(count, 1), Message: e.Message})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Last.After(rows[j].Last) })
	if len(rows) > maxDenials {
		rows = rows[:maxDenials]
	}
	return rows
}

func (x *cli) listFlags(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVarP(&x.allNamespaces, "all-namespaces", "A", false, "the tenants of every namespace")
	outputFlag(cmd, &x.output, what)
}

func (x *cli) statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "What a tenant waits for, or every tenant at a glance",
		Long: `Without a name: every tenant of the namespace (-A: of every namespace), one row
each, with what to do next. With a name: the conditions of the tenant, its
worker mapping (catalog workers), its sandbox and its node, and its sandbox's
faculty bundles. -o json|yaml prints the same as data.`,
		Args:              optionalName,
		ValidArgsFunction: x.completeTenants,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := x.checkOutput(cmd); err != nil {
				return err
			}
			if len(args) > 0 && x.allNamespaces {
				return usagef(cmd, "a tenant's name and --all-namespaces do not go together: give -n NAMESPACE")
			}
			return x.withClient(func(ctx context.Context, args []string) error {
				if len(args) == 0 {
					return x.list(ctx, false)
				}
				return x.status(ctx, args[0])
			})(cmd, args)
		},
	}
	x.listFlags(cmd, "the status")
	return cmd
}

func (x *cli) listCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Every tenant at a glance, with what to do next",
		Long: `Every tenant of the namespace (-A: of every namespace), one row each, as
status without a name prints them. -o json|yaml prints the Tenant objects
(a List, as kubectl get does).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := x.checkOutput(cmd); err != nil {
				return err
			}
			return x.withClient(func(ctx context.Context, _ []string) error { return x.list(ctx, true) })(cmd, args)
		},
	}
	x.listFlags(cmd, "the Tenants")
	return cmd
}

// list prints every tenant of the namespace (or all): a table, or, with
// -o, the rows (status) or the Tenant objects (tenant list).
func (x *cli) list(ctx context.Context, objects bool) error {
	var opts []client.ListOption
	if !x.allNamespaces {
		opts = append(opts, client.InNamespace(x.namespace))
	}
	var tenants playgroundv1alpha1.TenantList
	if err := x.c.List(ctx, &tenants, opts...); err != nil {
		return err
	}
	var sandboxes playgroundv1alpha1.SandboxList
	if err := x.c.List(ctx, &sandboxes, opts...); err != nil {
		return err
	}
	sort.Slice(tenants.Items, func(i, j int) bool {
		a, b := &tenants.Items[i], &tenants.Items[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	if objects && x.output != "" {
		items := make([]any, len(tenants.Items))
		for i := range tenants.Items {
			items[i] = x.objectData(&tenants.Items[i])
		}
		return x.print(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	byName := map[client.ObjectKey]*playgroundv1alpha1.Sandbox{}
	for i := range sandboxes.Items {
		byName[client.ObjectKeyFromObject(&sandboxes.Items[i])] = &sandboxes.Items[i]
	}
	rows := make([]tenantRow, 0, len(tenants.Items))
	for i := range tenants.Items {
		t := &tenants.Items[i]
		rows = append(rows, x.rowOf(t, byName[client.ObjectKey{Namespace: t.Namespace, Name: sandboxName(t)}]))
	}
	if x.output != "" {
		return x.print(map[string]any{"items": rows})
	}
	if len(rows) == 0 {
		where := "namespace " + x.namespace
		if x.allNamespaces {
			where = "any namespace"
		}
		fmt.Fprintf(x.out, "No tenants in %s: kubectl playground tenant create NAME makes one.\n", where)
		return nil
	}
	return x.printRows(rows)
}

func (x *cli) printRows(rows []tenantRow) error {
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	if x.allNamespaces {
		fmt.Fprint(w, "NAMESPACE\t")
	}
	fmt.Fprintln(w, "NAME\tCATALOG\tREADY\tPHASE\tSTATE\tNODE\tAGE\tNEXT")
	for _, r := range rows {
		if x.allNamespaces {
			fmt.Fprintf(w, "%s\t", r.Namespace)
		}
		age := "-"
		if !r.Created.IsZero() {
			age = duration.HumanDuration(time.Since(r.Created.Time))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Catalog, r.Ready, cmpOr(r.Phase, "-"), cmpOr(r.State, "-"), cmpOr(r.Node, "-"), age, r.Next)
	}
	return w.Flush()
}

// rowOf sums up a tenant and its sandbox (nil when it has none yet).
func (x *cli) rowOf(t *playgroundv1alpha1.Tenant, s *playgroundv1alpha1.Sandbox) tenantRow {
	r := tenantRow{
		Namespace: t.Namespace, Name: t.Name, Catalog: cmpOr(string(t.Spec.Catalog), string(playgroundv1alpha1.CatalogSandbox)),
		Ready: string(metav1.ConditionUnknown), Suspended: t.Spec.Suspended, Created: t.CreationTimestamp,
	}
	ready := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.ReadyCondition)
	if ready != nil {
		r.Ready, r.Reason = string(ready.Status), ready.Reason
	}
	if s != nil {
		r.Phase, r.Node, r.SandboxID = string(s.Status.Phase), s.Spec.NodeName, s.Status.SandboxID
	}
	cmd := func(verb string) string {
		if x.allNamespaces {
			return fmt.Sprintf("kubectl playground -n %s %s %s", t.Namespace, verb, t.Name)
		}
		return fmt.Sprintf("kubectl playground %s %s", verb, t.Name)
	}
	var jobs, running *metav1.Condition
	if s != nil {
		jobs = meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.JobsAdmittedCondition)
		running = meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.RunningCondition)
	}
	if running != nil {
		r.State = running.Reason
	}
	switch {
	case !t.DeletionTimestamp.IsZero():
		r.Next = "being destroyed"
	case t.Spec.Suspended:
		r.Next = "suspended: " + cmd("tenant resume")
	case jobs != nil && jobs.Status == metav1.ConditionFalse:
		r.Next = "background jobs halted (" + jobs.Reason + "): " + cmd("tenant restart")
	case running != nil && running.Reason == playgroundv1alpha1.ReasonCPULimitReached:
		r.Next = "frozen for its usage limit until its period resets, or raise spec.sandbox.usageLimits: " + cmd("status")
	case ready != nil && ready.Status == metav1.ConditionTrue && running != nil && running.Status == metav1.ConditionFalse:
		r.Next = "connect (asleep: the next call wakes it): " + cmd("attach")
	case ready != nil && ready.Status == metav1.ConditionTrue:
		r.Next = "connect: " + cmd("attach")
	case ready == nil:
		r.Next = "waiting for the manager: " + cmd("status")
	default:
		r.Next = ready.Reason + ": " + cmd("status")
	}
	return r
}

func (x *cli) status(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	s, err := x.sandboxOf(ctx, t)
	if err != nil {
		return err
	}
	st := tenantStatus{tenantRow: x.rowOf(t, s), Settings: settingsOf(t, s)}
	st.Conditions = conditionRows("tenant/"+t.Name, t.Status.Conditions)
	if t.Spec.Catalog == playgroundv1alpha1.CatalogWorkers {
		rows, err := x.workerRows(ctx, t)
		if err != nil {
			return err
		}
		st.Conditions = append(st.Conditions, rows...)
	}
	if s == nil {
		why := "the manager has not created it yet"
		if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.SandboxReadyCondition); c != nil && c.Reason == playgroundv1alpha1.ReasonNamespaceCeilingExceeded {
			why = "the manager creates none while the namespace is at a TenantPolicy's ceiling (SandboxReady above says which)"
		}
		st.Conditions = append(st.Conditions, conditionRow{"sandbox/" + sandboxName(t), "-", "-", "NotFound", why})
	} else {
		st.Conditions = append(st.Conditions, conditionRows("sandbox/"+s.Name, s.Status.Conditions)...)
		if s.Spec.NodeName != "" {
			st.Conditions = append(st.Conditions, x.nodeRow(ctx, s.Spec.NodeName))
		}
		st.Faculties = x.facultyRows(ctx, name, s)
		st.EgressDenials = x.egressDenials(ctx, s)
	}
	var limits *playgroundv1alpha1.UsageLimits
	st.Usage, limits = usageOf(t, s)
	if x.output != "" {
		return x.print(st)
	}
	if err := x.printRows([]tenantRow{st.tenantRow}); err != nil {
		return err
	}
	fmt.Fprintln(x.out)
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BACKEND\tISOLATION\tTOOLS\tIDLE")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", st.Settings.Backend, cmpOr(st.Settings.Isolation, "-"), cmpOr(st.Settings.Tools, "-"), st.Settings.Idle)
	if st.Settings.Image != "" {
		digest := cmpOr(st.Settings.Digest, "(not resolved yet: see ImageResolved)")
		if st.Settings.SignedBy != "" {
			digest += " (signed by " + st.Settings.SignedBy + ")"
		}
		fmt.Fprintf(w, "\nIMAGE\tDIGEST\n%s\t%s\n", st.Settings.Image, digest)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(x.out)
	w = tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "OBJECT\tCONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Object, c.Type, c.Status, c.Reason, c.Message)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(st.EgressDenials) > 0 {
		fmt.Fprintln(x.out)
		w = tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "EGRESS DENIED\tCOUNT\tWHAT")
		for _, d := range st.EgressDenials {
			fmt.Fprintf(w, "%s\t%d\t%s\n", d.Last.UTC().Format(time.RFC3339), d.Count, d.Message)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if st.Usage != nil {
		fmt.Fprintln(x.out)
		if err := printUsage(x.out, st.Usage, limits, time.Now()); err != nil {
			return err
		}
	}
	if len(st.Faculties) == 0 {
		return nil
	}
	fmt.Fprintln(x.out)
	w = tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FACULTY\tSTATE\tFINGERPRINT\tNODE BUILD\tMESSAGE")
	for _, f := range st.Faculties {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", f.Name, f.State, f.Fingerprint, f.NodeBuild, f.Message)
	}
	return w.Flush()
}

// settingsOf is what tenant t asked for of its sandbox (s, nil when it
// has none yet) and its tools, the defaults filled in.
func settingsOf(t *playgroundv1alpha1.Tenant, s *playgroundv1alpha1.Sandbox) settingsRow {
	sb := t.Spec.Sandbox
	r := settingsRow{Backend: cmpOr(string(sb.Backend), string(playgroundv1alpha1.BackendOCI)), Idle: "never"}
	if r.Backend == string(playgroundv1alpha1.BackendOCI) {
		r.Isolation = cmpOr(string(sb.Isolation), string(playgroundv1alpha1.IsolationContainer))
		if s != nil && s.Status.Isolation != "" {
			r.Isolation = string(s.Status.Isolation) // what it runs with
		}
	}
	if t.Spec.Catalog != playgroundv1alpha1.CatalogWorkers {
		r.Tools = cmpOr(string(t.Spec.Tools), string(playgroundv1alpha1.ToolSetStandard))
	}
	if sb.Image != nil {
		r.Image = sb.Image.Reference
		if s != nil && s.Status.Image != nil && s.Status.Image.Reference == r.Image {
			r.Digest, r.SignedBy = s.Status.Image.Digest, strings.Join(s.Status.Image.SignedBy, ", ")
		}
	}
	if is := sb.IdleSuspend; is != nil {
		r.Idle = fmt.Sprintf("%s after %s", cmpOr(string(is.Mode), string(playgroundv1alpha1.IdleModeSuspend)), is.After.Duration)
		if is.WithRunningJobs {
			r.Idle += ", even with running jobs"
		}
	}
	return r
}

// nodeRow is the registration of the node's agent.
func (x *cli) nodeRow(ctx context.Context, node string) conditionRow {
	object := "node/" + node
	var lease coordinationv1.Lease
	err := x.c.Get(ctx, client.ObjectKey{Namespace: x.leaseNamespace, Name: agentlease.Name(node)}, &lease)
	switch {
	case apierrors.IsNotFound(err):
		return conditionRow{object, "Registered", "False", "NoAgent", "no agent registration in namespace " + x.leaseNamespace}
	case err != nil:
		return conditionRow{object, "Registered", "Unknown", "Error", err.Error()}
	}
	reg, err := agentlease.FromLease(&lease)
	healthy := err == nil && reg.Healthy(time.Now())
	status, reason, msg := "True", "AgentHealthy", "renewed "+reg.Renewed.UTC().Format(time.RFC3339)+" at "+reg.Endpoint
	if !healthy {
		status, reason = "False", "AgentUnavailable"
	}
	if reg.AdmissionHalted != "" {
		msg += "; jobs not admitted: " + reg.AdmissionHalted
	}
	return conditionRow{object, "Registered", status, reason, msg}
}

// facultyRows lists the faculty bundles of the tenant's sandbox: what
// the agent installed (state and fingerprint, from the sandbox's
// status.faculties), the build of each bundle on the sandbox's node (from
// the bundle's status.nodes), and what to do when they differ. Fingerprints
// are shortened to 12 hex digits, as in the conditions' messages; `kubectl
// get fb -o wide` shows them whole.
func (x *cli) facultyRows(ctx context.Context, tenant string, s *playgroundv1alpha1.Sandbox) []facultyRow {
	installed := map[string]playgroundv1alpha1.FacultyInstallStatus{}
	var names []string
	for _, f := range s.Spec.Faculties {
		names = append(names, f.Name)
	}
	for _, f := range s.Status.Faculties {
		installed[f.Name] = f
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name) // no longer listed, still reported
		}
	}
	var rows []facultyRow
	for _, name := range names {
		inst, reported := installed[name]
		state, fp, msg := string(inst.State), shortFingerprint(inst.Fingerprint), inst.Message
		if !reported {
			state, msg = "-", "not reported by the node's agent yet"
		}
		var fb playgroundv1alpha1.FacultyBundle
		nodeBuild := "-"
		switch err := x.c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &fb); {
		case apierrors.IsNotFound(err):
			if msg == "" {
				msg = fmt.Sprintf("no FacultyBundle %q in namespace %s", name, s.Namespace)
			}
		case err != nil:
			msg = fmt.Sprintf("reading FacultyBundle %s: %v", name, err)
		default:
			nodeBuild = nodeBuildOf(&fb, s.Spec.NodeName)
			if e := entryOf(&fb, s.Spec.NodeName); e != nil {
				switch {
				case reported && e.Ready && e.Fingerprint != "" && e.Fingerprint != inst.Fingerprint:
					// The agent says the sandbox waits for a restart; say how.
					msg = fmt.Sprintf("build %s is ready on node %s: kubectl playground tenant restart %s switches the sandbox to it", shortFingerprint(e.Fingerprint), e.NodeName, tenant)
				case msg == "" && !e.Ready:
					msg = e.Message
				}
			}
		}
		rows = append(rows, facultyRow{Name: name, State: state, Fingerprint: fp, NodeBuild: nodeBuild, Message: oneLine(msg)})
	}
	return rows
}

// entryOf is the bundle's status.nodes entry of node, or nil.
func entryOf(fb *playgroundv1alpha1.FacultyBundle, node string) *playgroundv1alpha1.BundleNodeStatus {
	for i := range fb.Status.Nodes {
		if node != "" && fb.Status.Nodes[i].NodeName == node {
			return &fb.Status.Nodes[i]
		}
	}
	return nil
}

// nodeBuildOf says what the bundle's build on node is: its fingerprint,
// and whether it is ready.
func nodeBuildOf(fb *playgroundv1alpha1.FacultyBundle, node string) string {
	e := entryOf(fb, node)
	switch {
	case e == nil:
		return "none yet"
	case e.Ready:
		return shortFingerprint(e.Fingerprint) + " ready"
	case e.Fingerprint != "":
		return shortFingerprint(e.Fingerprint) + " not ready"
	default:
		return "not ready"
	}
}

func shortFingerprint(fp string) string {
	switch {
	case fp == "":
		return "-"
	case len(fp) > 12:
		return fp[:12]
	default:
		return fp
	}
}

// oneLine keeps a message (a build log's tail, say) on its table row.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// conditionRows are an object's conditions, Ready first: it is the summary.
func conditionRows(object string, conds []metav1.Condition) []conditionRow {
	if len(conds) == 0 {
		return []conditionRow{{object, "-", "-", "-", "no conditions reported yet"}}
	}
	sorted := append([]metav1.Condition(nil), conds...)
	sort.Slice(sorted, func(i, j int) bool {
		if (sorted[i].Type == playgroundv1alpha1.ReadyCondition) != (sorted[j].Type == playgroundv1alpha1.ReadyCondition) {
			return sorted[i].Type == playgroundv1alpha1.ReadyCondition
		}
		return sorted[i].Type < sorted[j].Type
	})
	rows := make([]conditionRow, len(sorted))
	for i, c := range sorted {
		rows[i] = conditionRow{object, c.Type, string(c.Status), c.Reason, c.Message}
	}
	return rows
}

// print writes v as -o asks: JSON indented as kubectl does, or YAML.
func (x *cli) print(v any) error {
	var b []byte
	var err error
	if x.output == "json" {
		if b, err = json.MarshalIndent(v, "", "    "); err == nil {
			b = append(b, '\n')
		}
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = x.out.Write(b)
	return err
}

// printObject prints an object of the API as -o asks.
func (x *cli) printObject(obj client.Object) error {
	return x.print(x.objectData(obj))
}

// objectData is obj as kubectl get -o yaml shows it: with its apiVersion
// and kind, without managedFields; and, for an object not yet created (a
// dry run), without the fields only the API server fills.
func (x *cli) objectData(obj client.Object) map[string]any {
	obj = obj.DeepCopyObject().(client.Object)
	if gvk, err := apiutil.GVKForObject(obj, pluginScheme); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	obj.SetManagedFields(nil)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	if obj.GetUID() == "" {
		delete(m, "status")
	}
	prune(m)
	return m
}

// prune removes the empty maps and nulls that zero Go structs leave.
func prune(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(v)
			if len(v) == 0 {
				delete(m, k)
			}
		}
	}
}

// workerRows are the WorkerMappings of a tenant whose catalog is
// workers, their conditions, where they forward, and the worker process as
// its agent reports it.
func (x *cli) workerRows(ctx context.Context, t *playgroundv1alpha1.Tenant) ([]conditionRow, error) {
	var list playgroundv1alpha1.WorkerMappingList
	if err := x.c.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the worker mappings of namespace %s: %w", t.Namespace, err)
	}
	var rows []conditionRow
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.TenantRef.Name != t.Name {
			continue
		}
		object := "workermapping/" + m.Name
		rows = append(rows, conditionRows(object, m.Status.Conditions)...)
		endpoint := cmpOr(m.Status.Endpoint, "not resolved yet")
		if m.Spec.Destination.Service != nil {
			endpoint += fmt.Sprintf(" (%d ready endpoints)", len(m.Status.ReadyEndpoints))
		}
		rows = append(rows, conditionRow{object, "Endpoint", "-", "-", endpoint})
		if m.Spec.Destination.Sandbox == nil {
			continue
		}
		p := m.Status.Worker
		if p == nil {
			rows = append(rows, conditionRow{object, "Worker", "Unknown", "NotReported", "the sandbox's agent has not reported the worker process yet"})
			continue
		}
		status, reason := "False", "Exited"
		if p.Running {
			status, reason = "True", "Running"
		}
		msg := fmt.Sprintf("restarts %d", p.Restarts)
		if p.LastExit != "" {
			msg += "; last exit: " + p.LastExit
			if p.LastExitTime != nil {
				msg += " at " + p.LastExitTime.UTC().Format(time.RFC3339)
			}
		}
		rows = append(rows, conditionRow{object, "Worker", status, reason, msg})
	}
	if len(rows) == 0 {
		rows = append(rows, conditionRow{"workermapping/-", "-", "-", "NoMapping", fmt.Sprintf("no WorkerMapping in namespace %s has spec.tenantRef.name: %s, so the gateway has nowhere to forward the tenant", t.Namespace, t.Name)})
	}
	return rows, nil
}

func (x *cli) logsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logs NAME",
		Short: "The end of the output of the tenant's sandbox worker (catalog workers)",
		Long: `The end of the output of the tenant's sandbox worker (catalog workers), as its
agent last read it, and how it last ended.`,
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE:              x.withClient(func(ctx context.Context, args []string) error { return x.logs(ctx, args[0]) }),
	}
}

// logs prints the end of the output of the tenant's sandbox worker that
// its agent keeps in the mapping's status, and how the worker last ended.
func (x *cli) logs(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	var list playgroundv1alpha1.WorkerMappingList
	if err := x.c.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return fmt.Errorf("listing the worker mappings of namespace %s: %w", t.Namespace, err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.TenantRef.Name != t.Name {
			continue
		}
		if m.Spec.Destination.Sandbox == nil {
			return fmt.Errorf("tenant %s's worker is the Service %s: read its logs where it runs (kubectl logs)", name, m.Spec.Destination.Service.Name)
		}
		p := m.Status.Worker
		if p == nil {
			return fmt.Errorf("the agent of tenant %s's sandbox has not reported its worker yet (see kubectl playground status %s)", name, name)
		}
		fmt.Fprint(x.out, p.Output)
		if p.Output != "" && !strings.HasSuffix(p.Output, "\n") {
			fmt.Fprintln(x.out)
		}
		state := "running"
		if !p.Running {
			state = "not running"
		}
		fmt.Fprintf(x.out, "# workermapping/%s: %s, %d restarts", m.Name, state, p.Restarts)
		if p.LastExit != "" {
			fmt.Fprintf(x.out, ", last exit: %s", p.LastExit)
			if p.LastExitTime != nil {
				fmt.Fprintf(x.out, " at %s", p.LastExitTime.UTC().Format(time.RFC3339))
			}
		}
		if p.Error != "" {
			fmt.Fprintf(x.out, "; cannot start: %s", p.Error)
		}
		fmt.Fprintln(x.out)
		return nil
	}
	return fmt.Errorf("tenant %s has no WorkerMapping in namespace %s: only workers tenants have a worker to show", name, t.Namespace)
}
