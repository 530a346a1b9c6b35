package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/cli"
	basecompatibility "k8s.io/component-base/compatibility"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as in the kube-apiserver's main
	_ "k8s.io/component-base/metrics/prometheus/version"  // as in the kube-apiserver's main
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

// startEtcd starts an embedded etcd on 127.0.0.1, waits until it serves, and returns its
// client URL and a function that stops it.
func startEtcd(dir string, clientPort, peerPort int) (string, func(), error) {
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}

	cfg := embed.NewConfig()
	cfg.Name = "real-apiserver"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Errors only, in etcd's usual format; and none at all once stopping, as etcd then logs
	// (with stack traces) the closing of its own listeners as errors.
	level := zap.NewAtomicLevelAt(zap.ErrorLevel)
	logConfig := logutil.DefaultZapLoggerConfig
	logConfig.Level = level
	logger, err := logConfig.Build()
	if err != nil {
		return "", nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// The data lives only as long as this process: durability is not needed, speed is.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("etcd: %v", err)
	}
	stop := func() {
		level.SetLevel(zap.FatalLevel)
		e.Close()
	}
	select {
	case <-e.Server.ReadyNotify():
		return clientURL.String(), stop, nil
	case err := <-e.Err():
		stop()
		return "", nil, fmt.Errorf("etcd: %v", err)
	case <-time.After(time.Minute):
		stop()
		return "", nil, fmt.Errorf("etcd: not ready in a minute")
	}
}

// runAPIServer does what kube-apiserver's command does, but with a context of ours:
// app.NewAPIServerCommand() installs its own SIGTERM handler, which exits the process
// on a second signal, before our cleanup.
func runAPIServer(ctx context.Context, args []string) error {
	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	registry := s.GenericServerRunOptions.ComponentGlobalsRegistry
	if err := registry.Set(); err != nil { // applies --feature-gates
		return err
	}
	// The server's loopback clients should not log the warnings the server itself sends.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	if err := logsapi.ValidateAndApply(s.Logs, registry.FeatureGateFor(basecompatibility.DefaultKubeComponent)); err != nil {
		return err
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return utilerrors.NewAggregate(errs)
	}
	return apiserver.Run(ctx, completed)
}

// runControllerManager is the child process: kube-controller-manager's own command.
// SIGTERM ends it (Go's default action), which is all it needs: it keeps no state.
func runControllerManager(args []string) int {
	cmd := controllermanager.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}
