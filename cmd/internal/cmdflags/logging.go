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

// Package cmdflags holds the command-line flags that Playground's commands
// share (playground's roles and playground-dev): the log flags, the vm
// backend's, runsc's and lists of strings.
package cmdflags

import (
	"flag"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/playground-dev/playground/internal/memlimit"
)

// LogOptions are the log flags, the same for every role:
// controller-runtime's zap flags (--zap-encoder json|console,
// --zap-log-level, --zap-stacktrace-level, --zap-time-encoding,
// --zap-devel; docs/operations.md), with defaults of the role's.
type LogOptions struct {
	zap.Options
	fs       *flag.FlagSet
	defaults map[string]string
}

// LogFlags registers the log flags on fs. encoder is the role's default:
// json for the components, console for dev at a terminal. Stack traces are
// off by default: an error's message says what went wrong. --zap-devel
// brings zap's development defaults instead.
func LogFlags(fs *flag.FlagSet, encoder string) *LogOptions {
	o := &LogOptions{fs: fs, defaults: map[string]string{"zap-encoder": encoder, "zap-stacktrace-level": "panic"}}
	o.BindFlags(fs)
	for name, value := range o.defaults {
		fs.Lookup(name).DefValue = value
	}
	return o
}

// VerbosityFlag registers -v N, the manager's flag from before the zap
// flags: the same as --zap-log-level=N (0: info).
func VerbosityFlag(fs *flag.FlagSet) {
	fs.Func("v", "log verbosity: the same as --zap-log-level (kept for existing deployments)", func(s string) error {
		if s == "0" {
			s = "info"
		}
		return fs.Set("zap-log-level", s)
	})
}

// SetLogger makes the logger of the parsed flags the process's,
// controller-runtime's and klog's (client-go logs through klog), and
// returns it. Every role calls it first, so it also gives the runtime its
// soft memory limit (package memlimit) and says which.
func (o *LogOptions) SetLogger() logr.Logger {
	log := o.Logger()
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	switch limit, source, err := memlimit.Set(memlimit.DefaultFraction); {
	case err != nil:
		log.Error(err, "No soft memory limit for the Go runtime")
	case limit > 0:
		log.Info("Soft memory limit for the Go runtime", "bytes", limit, "from", source)
	case source != "":
		log.V(1).Info("Soft memory limit for the Go runtime left as set", "by", source)
	}
	return log
}

// Logger returns the logger of the parsed flags, writing to standard error
// unless DestWriter says otherwise.
func (o *LogOptions) Logger() logr.Logger {
	if !o.Development {
		given := map[string]bool{}
		o.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, value := range o.defaults {
			if given[name] {
				continue
			}
			if err := o.fs.Set(name, value); err != nil {
				panic(fmt.Sprintf("--%s=%s: %v", name, value, err)) // a default of ours
			}
		}
	}
	return zap.New(zap.UseFlagOptions(&o.Options))
}
