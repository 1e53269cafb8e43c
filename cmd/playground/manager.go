package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/internal/agentlease"
)

// leaderElectionID names the Lease that manager replicas elect a leader on.
const leaderElectionID = "playground-manager.playground.dev"

// runManager runs the controllers until ctx ends.
func runManager(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("playground manager", flag.ContinueOnError)
	// --kubeconfig: a kubeconfig file; without it $KUBECONFIG, the in-cluster
	// configuration, then ~/.kube/config (ctrl.GetConfig's order).
	config.RegisterFlags(fs)
	metricsAddr := fs.String("metrics-bind-address", ":8080", `address of the Prometheus metrics endpoint; "0" disables it`)
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	leaderElect := fs.Bool("leader-elect", false, "elect a leader among manager replicas, so that one reconciles at a time")
	leaseNamespace := fs.String("lease-namespace", agentlease.DefaultNamespace, "namespace of the agents' registration Leases and of the leader election Lease")
	workers := fs.Int("workers", controllers.DefaultWorkers, "how many Tenants, and how many Sandboxes, are reconciled at once")
	verbosity := fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity))))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := playgroundv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         controllers.CacheOptions(controllers.Options{LeaseNamespace: *leaseNamespace}),
		Metrics:                       metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:        *probeAddr,
		LeaderElection:                *leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       *leaseNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := controllers.Setup(mgr, controllers.Options{LeaseNamespace: *leaseNamespace, Workers: *workers}); err != nil {
		return fmt.Errorf("setting up the controllers: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the informers have synced: before that the manager would
	// act on an empty view of the cluster.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		sctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(sctx) {
			return errors.New("the informers have not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.Log.WithName("manager").Info("Starting the manager", "leaderElection", *leaderElect, "leaseNamespace", *leaseNamespace)
	return mgr.Start(ctx)
}
