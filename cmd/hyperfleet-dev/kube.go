package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftcrd"
	"github.com/hyperfleet/hyperfleet/internal/atomicfile"
)

// kubeConfig is what `hyperfleet-dev kube` is configured with.
type kubeConfig struct {
	assets     string // etcd and kube-apiserver, as `make k8s-assets` builds them
	dataDir    string // etcd's data, kept between runs
	certDir    string // kube-apiserver's certificates, made afresh on every start
	kubeconfig string // written for the processes that talk to this kube-apiserver
	namespace  string
	listen     string // kube-apiserver's secure address; port 0 picks a free one
	etcdListen string // etcd's client address; port 0 picks a free one
}

func devCacheDir() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "hyperfleet")
}

func kubeCommand() *cobra.Command {
	cfg := kubeConfig{
		assets:     filepath.Join(devCacheDir(), "k8s", "1.37.2"),
		dataDir:    filepath.Join(devCacheDir(), "dev", "etcd"),
		certDir:    filepath.Join(devCacheDir(), "dev", "kube-certs"),
		kubeconfig: filepath.Join(devCacheDir(), "dev", "kubeconfig"), // up passes each management cluster's
		namespace:  "clusters",
		listen:     "127.0.0.1:0",
		etcdListen: "127.0.0.1:0",
	}
	if v := os.Getenv("KUBEBUILDER_ASSETS"); v != "" {
		cfg.assets = v
	}
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Run a local kube-apiserver with HyperShift's CRDs until interrupted",
		Long: `Runs etcd and kube-apiserver from the binaries 'make k8s-assets' builds, installs HyperShift's HostedCluster and
NodePool CRDs and the namespace for HostedClusters, writes a kubeconfig for them, and runs until interrupted.
etcd keeps its data between runs; the certificates, and so the kubeconfig, are new on every start. An etcd or
kube-apiserver left running on the same directories by a run that was killed is stopped first. No HyperShift
operator runs: start hypershift-sim against the kubeconfig.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			return runKube(cmd.Context(), cfg, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.assets, "assets", cfg.assets, "directory with etcd and kube-apiserver (make k8s-assets; $KUBEBUILDER_ASSETS)")
	fs.StringVar(&cfg.dataDir, "data-dir", cfg.dataDir, "etcd's data directory, kept between runs")
	fs.StringVar(&cfg.certDir, "cert-dir", cfg.certDir, "kube-apiserver's certificate directory, emptied on every start")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig-out", cfg.kubeconfig, "where to write the kubeconfig of this kube-apiserver")
	fs.StringVar(&cfg.namespace, "namespace", cfg.namespace, "namespace to create for HostedClusters")
	fs.StringVar(&cfg.listen, "listen", cfg.listen, "kube-apiserver's (HTTPS) address; port 0 picks a free one")
	fs.StringVar(&cfg.etcdListen, "etcd-listen", cfg.etcdListen, "etcd's client address; port 0 picks a free one")
	return cmd
}

func runKube(ctx context.Context, cfg kubeConfig, log *slog.Logger) error {
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(cfg.assets, bin)); err != nil {
			return fmt.Errorf("no %s in %s: build the Kubernetes binaries first with `make k8s-assets` (once; 6–25 min cold)", bin, cfg.assets)
		}
	}
	dataDir, certDir, err := prepareKubeDirs(cfg)
	if err != nil {
		return err
	}
	if n := stopLeftovers(dataDir, certDir, log); n > 0 {
		log.Warn("stopped an etcd or kube-apiserver left running by an earlier run", "processes", n)
	}
	if err := os.RemoveAll(certDir); err != nil {
		return fmt.Errorf("kube-apiserver cert dir: %w", err)
	}
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("kube-apiserver cert dir: %w", err)
	}
	ctrllog.SetLogger(logr.Discard()) // envtest's start-up notes; failures come back as errors
	started := time.Now()
	env := &envtest.Environment{BinaryAssetsDirectory: cfg.assets, ControlPlaneStartTimeout: 2 * time.Minute}
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Path = filepath.Join(cfg.assets, "kube-apiserver")
	apiServer.CertDir = certDir
	if host, port, ok := fixedAddress(cfg.listen); ok {
		apiServer.Address, apiServer.Port = host, port // of its secure listener, the only one
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(cfg.assets, "etcd"), DataDir: dataDir}
	if host, port, ok := fixedAddress(cfg.etcdListen); ok {
		env.ControlPlane.Etcd.URL = &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}
	}
	rc, err := env.Start()
	if err != nil {
		return fmt.Errorf("start etcd and kube-apiserver: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			log.Warn("stopping kube-apiserver and etcd", slog.Any("error", err))
		}
	}()
	if err := prepare(ctx, rc, cfg.namespace); err != nil {
		return err
	}
	// In one rename: the applier watches the directory of management clusters' kubeconfigs and must never read
	// half of one.
	if err := atomicfile.WriteFile(cfg.kubeconfig, env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	log.Info("kube-apiserver ready", slog.String("server", rc.Host), slog.String("kubeconfig", cfg.kubeconfig),
		slog.String("namespace", cfg.namespace), slog.String("started_in", time.Since(started).Round(10*time.Millisecond).String()))
	<-ctx.Done()
	log.Info("stopping kube-apiserver and etcd")
	return nil
}

// prepare installs HyperShift's CRDs and creates the namespace for HostedClusters.
func prepare(ctx context.Context, rc *rest.Config, namespace string) error {
	quiet := rest.CopyConfig(rc)
	quiet.WarningHandler = rest.NoWarnings{} // HyperShift's CRD uses an OpenAPI format the server does not know
	client, err := dynamic.NewForConfig(quiet)
	if err != nil {
		return err
	}
	installCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := hypershiftcrd.Install(installCtx, client, "hyperfleet-dev"); err != nil {
		return fmt.Errorf("install the HyperShift CRDs: %w", err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	_, err = client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(installCtx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}
