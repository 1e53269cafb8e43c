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

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/playground-dev/playground/internal/audit"
)

// auditFlags registers the audit trail's flags on fs and returns what
// makes the trail of component once they are parsed. stdout is whether
// standard output is free for records (not in stdio mode).
func auditFlags(fs *flag.FlagSet) func(component string, stdout bool) (*audit.Trail, error) {
	level := fs.String("audit-level", string(audit.LevelMetadata), "what the audit trail keeps of each tool call: None, Metadata (who, what tool, where, outcome, duration), Request (and the command, path or job it named) or RequestResult (and the sizes of request and result, a command's exit code)")
	path := fs.String("audit-log-path", "-", `file the audit records are appended to, as JSON lines, rotated by size; "-" is standard output (not with --stdio, whose standard output is the protocol); "" writes no file`)
	maxMiB := fs.Int("audit-log-max-size", 100, "MiB an audit file grows to before it is rotated (FILE.1, FILE.2, ...)")
	backups := fs.Int("audit-log-max-backups", 5, "rotated audit files kept")
	webhook := fs.String("audit-webhook-url", "", "URL the audit records are also POSTed to (JSON lines, batched); a slow or dead endpoint never holds a call up: what it misses is dropped, counted and announced in the next record it gets")
	queue := fs.Int("audit-queue", audit.DefaultQueue, "records each audit sink holds before it drops")
	return func(component string, stdout bool) (*audit.Trail, error) {
		lvl, err := audit.ParseLevel(*level)
		if err != nil {
			return nil, fmt.Errorf("--audit-level: %w", err)
		}
		if lvl == audit.LevelNone {
			return nil, nil
		}
		if *maxMiB <= 0 || *backups <= 0 || *queue <= 0 {
			return nil, errors.New("--audit-log-max-size, --audit-log-max-backups and --audit-queue must be positive")
		}
		var sinks []audit.Sink
		switch *path {
		case "":
		case "-":
			if stdout {
				sinks = append(sinks, audit.Writer("stdout", os.Stdout, *queue))
			}
		default:
			s, err := audit.File(audit.FileOptions{Path: *path, MaxBytes: int64(*maxMiB) << 20, MaxBackups: *backups, Queue: *queue})
			if err != nil {
				return nil, fmt.Errorf("--audit-log-path: %w", err)
			}
			sinks = append(sinks, s)
		}
		if *webhook != "" {
			u, err := url.Parse(*webhook)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return nil, fmt.Errorf("--audit-webhook-url %q is not an http(s) URL", *webhook)
			}
			sinks = append(sinks, audit.Webhook(audit.WebhookOptions{URL: *webhook, Queue: *queue}))
		}
		if len(sinks) == 0 {
			return nil, nil
		}
		return audit.New(lvl, component, sinks...), nil
	}
}

// runAudit runs `playground audit verify FILE...`: it checks that the
// files (a rotated sink's, oldest first; - for standard input) hold
// together as the chains they were written as.
func runAudit(args []string, stdout io.Writer) error {
	if len(args) < 2 || args[0] != "verify" {
		return errors.New("usage: playground audit verify FILE... (the files of a rotated audit log oldest first, FILE.5 ... FILE.1 FILE; - reads standard input)")
	}
	var readers []io.Reader
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, name := range args[1:] {
		if name == "-" {
			readers = append(readers, os.Stdin)
			continue
		}
		f, err := os.Open(name) //nolint:gosec // G703: the operator names the files to check
		if err != nil {
			return err
		}
		files = append(files, f)
		readers = append(readers, f)
	}
	rep, err := audit.Verify(io.MultiReader(readers...))
	for _, gap := range rep.Announced {
		fmt.Fprintf(stdout, "announced gap: %s\n", gap)
	}
	if err != nil {
		return fmt.Errorf("audit trail does not verify after %d records: %w", rep.Records, err)
	}
	fmt.Fprintf(stdout, "ok: %d records in %d chains\n", rep.Records, rep.Chains)
	return nil
}
