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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/playground-dev/playground/internal/scheme"
	"github.com/playground-dev/playground/internal/selfowner"
)

// LeaderElectionID names the Lease that manager replicas elect a leader on,
// in the lease namespace.
const LeaderElectionID = "playground-manager.playground.dev"

// ManagerOptions configure a manager process: the reconcilers' Options and
// how the process serves.
type ManagerOptions struct {
	Options
	// Logger receives the manager's logs; the zero value is
	// controller-runtime's global logger.
	Logger logr.Logger
	// MetricsBindAddress and HealthProbeBindAddress are where the
	// Prometheus metrics and /healthz, /readyz are served; empty or "0"
	// serves none.
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's profiles (/debug/pprof/), without
	// authentication; empty or "0" serves none.
	PprofBindAddress string
	// LeaderElection makes replicas elect a leader (LeaderElectionID, in
	// the lease namespace), so that one reconciles at a time.
	LeaderElection bool
	// SkipNameValidation lets one process run several managers (tests,
	// `playground-dev`): controller names are otherwise process-unique.
	SkipNameValidation bool
}

// Scheme holds the types the manager reads and writes.
func Scheme() *runtime.Scheme { return scheme.New() }

// NewManager builds the manager that `playground manager`, `playground-dev`
// and the test suites run: its informers narrowed by CacheOptions, every
// reconciler set up, and health checks that report ready once the
// informers have synced. Start it to run the controllers.
func NewManager(cfg *rest.Config, opts ManagerOptions) (ctrl.Manager, error) {
	opts.defaults()
	disabled := func(addr string) string {
		if addr == "" {
			return "0"
		}
		return addr
	}
	mo := ctrl.Options{
		Scheme:                        Scheme(),
		Cache:                         CacheOptions(opts.Options),
		Metrics:                       metricsserver.Options{BindAddress: disabled(opts.MetricsBindAddress)},
		HealthProbeBindAddress:        disabled(opts.HealthProbeBindAddress),
		PprofBindAddress:              disabled(opts.PprofBindAddress),
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaseNamespace,
		LeaderElectionReleaseOnCancel: true,
	}
	if opts.Logger.GetSink() != nil {
		mo.Logger = opts.Logger
	}
	if opts.SkipNameValidation {
		mo.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := Setup(mgr, opts.Options); err != nil {
		return nil, fmt.Errorf("setting up the controllers: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the informers have synced: before that the manager would
	// act on an empty view of the cluster.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the informers have not synced yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if opts.LeaderElection && opts.Owner != nil {
		if err := mgr.Add(&leaderLeaseOwner{client: mgr.GetClient(), reader: mgr.GetAPIReader(), owner: opts.Owner, namespace: opts.LeaseNamespace}); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// leaderLeaseOwner gives the leader-election Lease, which client-go's
// leader election creates, the manager's ServiceAccount as owner, so that
// uninstalling removes it (package selfowner). It runs on the elected
// replica, once; the elector keeps the owner in its updates (it writes the
// object it read).
type leaderLeaseOwner struct {
	client    client.Client
	reader    client.Reader
	owner     *selfowner.Owner
	namespace string
}

func (l *leaderLeaseOwner) NeedLeaderElection() bool { return true }

func (l *leaderLeaseOwner) Start(ctx context.Context) error {
	key := types.NamespacedName{Namespace: l.namespace, Name: LeaderElectionID}
	err := retry.OnError(retry.DefaultBackoff, func(_ error) bool { return ctx.Err() == nil }, func() error {
		var lease coordinationv1.Lease
		if err := l.reader.Get(ctx, key, &lease); err != nil {
			return err
		}
		if !l.owner.Own(&lease) {
			return nil
		}
		return l.client.Update(ctx, &lease)
	})
	if err != nil && ctx.Err() == nil {
		// Only uninstalling notices: the Lease is then left behind.
		ctrl.LoggerFrom(ctx).Error(err, "Recording the manager's ServiceAccount as owner of the leader-election Lease", "lease", key.String())
	}
	return nil
}
