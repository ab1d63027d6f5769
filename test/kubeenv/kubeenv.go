// Package kubeenv gives tests a real kube-apiserver (and etcd) with HyperShift's HostedCluster and NodePool CRDs
// installed, so that what adapters and simulators write is checked by the real schema: OpenAPI validation,
// defaults and CEL rules.
//
// Each Start call runs its own control plane through controller-runtime's envtest and stops it when the test
// ends. A start takes about five seconds, so a package starts one in its top-level test and shares it between
// subtests, each working in a namespace of its own (see Env.Namespace).
//
// The binaries are not downloaded (setup-envtest cannot reach its buckets here): `make k8s-assets` builds them
// from the Go module proxy into a cache outside the clone, where Start finds them (see AssetsDir). Without them
// Start fails the test with instructions; it never skips, so a green run always means the tests ran.
package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftcrd"
)

const (
	// EnvAssets names the variable holding the directory with the etcd and kube-apiserver binaries. It is the
	// variable envtest itself reads; when set, it wins over every default.
	EnvAssets = "KUBEBUILDER_ASSETS"

	// EnvBuildDir names the variable with which cmd/hyperfleet-dev/k8sassets/build.sh is told where to put the binaries; Start
	// looks there too, so that a moved build is found without a second variable.
	EnvBuildDir = "HYPERFLEET_K8S_ASSETS"

	// KubernetesVersion is the version of the binaries that cmd/hyperfleet-dev/k8sassets/build.sh builds and Start expects.
	KubernetesVersion = "1.37.2"

	// FieldManager is the field manager with which Start installs the CRDs.
	FieldManager = "hyperfleet-kubeenv"

	// startTimeout bounds the start of each of etcd and kube-apiserver. envtest's 20 s default is too tight for a
	// two-core machine shared with compilers.
	startTimeout = 2 * time.Minute
	stopTimeout  = 30 * time.Second
	// crdTimeout bounds creating the CRDs and waiting for them to be established and served.
	crdTimeout = time.Minute
)

// Env is a running kube-apiserver with the HyperShift CRDs established. Its clients act as a cluster admin
// (system:masters). Callers must not modify Config; copy it with rest.CopyConfig to change it.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Dynamic is a dynamic client built from Config, for HostedClusters, NodePools and anything else.
	Dynamic *dynamic.DynamicClient
	// Clientset is a typed client built from Config, for built-in kinds such as Namespaces and Secrets.
	Clientset *kubernetes.Clientset
	// Kubeconfig is a kubeconfig document with Config's server, CA and client certificate; WriteKubeconfig puts
	// it in a file for processes that take --kubeconfig.
	Kubeconfig []byte

	plane *envtest.Environment
}

// Start starts etcd and kube-apiserver, installs the HostedCluster and NodePool CRDs, waits until both are
// established and served, and returns the environment; tb.Cleanup stops it. It fails tb (never skips) when the
// binaries are missing, telling the developer to run `make k8s-assets`, and when anything else goes wrong.
func Start(tb testing.TB) *Env {
	tb.Helper()
	dir, source := AssetsDir()
	if err := checkAssets(dir); err != nil {
		tb.Fatalf(missingAssets, err, dir, source, KubernetesVersion, EnvAssets)
	}

	// envtest logs through controller-runtime's global logger, which prints a stack trace when no logger has been
	// set within 30 s of the test binary's start. Its messages are debug-level start-up notes that a test never
	// needs (failures come back as errors), and nothing else in HyperFleet uses controller-runtime, so they are
	// discarded; a test that wants them sets its own logger after Start.
	ctrllog.SetLogger(logr.Discard())

	started := time.Now()
	te := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	// Explicit paths, so that envtest's own lookup (TEST_ASSET_* first) cannot pick binaries other than the ones
	// checked above.
	te.ControlPlane.GetAPIServer().Path = filepath.Join(dir, "kube-apiserver")
	te.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}

	cfg, err := te.Start()
	// A failed start can leave etcd running, so Stop is registered either way.
	tb.Cleanup(func() {
		if err := te.Stop(); err != nil {
			tb.Errorf("kubeenv: stopping kube-apiserver and etcd: %v", err)
		}
	})
	if err != nil {
		tb.Fatalf("kubeenv: starting kube-apiserver and etcd from %s: %v\n"+
			"(set KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true to see their output)", dir, err)
	}

	env, err := newEnv(cfg, te.KubeConfig)
	if err != nil {
		tb.Fatalf("kubeenv: %v", err)
	}
	env.plane = te
	// The API server warns that the CRD uses an OpenAPI format it does not know ("hostname"); that is HyperShift's
	// business, not the test's, so the installing client does not print warnings.
	quiet := rest.CopyConfig(cfg)
	quiet.WarningHandler = rest.NoWarnings{}
	installer, err := dynamic.NewForConfig(quiet)
	if err != nil {
		tb.Fatalf("kubeenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crdTimeout)
	defer cancel()
	if err := hypershiftcrd.Install(ctx, installer, FieldManager); err != nil {
		tb.Fatalf("kubeenv: installing the HyperShift CRDs: %v", err)
	}
	tb.Logf("kubeenv: kube-apiserver %s with the HyperShift CRDs ready in %s", KubernetesVersion,
		time.Since(started).Round(10*time.Millisecond))
	return env
}

const missingAssets = `kubeenv: no Kubernetes test binaries: %v
looked in %s (%s).

Build etcd and kube-apiserver %s once (cached outside the clone; a cold build takes 6-25 min on two cores):
    make k8s-assets        # runs cmd/hyperfleet-dev/k8sassets/build.sh
or point %s at a directory that holds both.`

// AssetsDir returns the directory in which Start looks for etcd and kube-apiserver, and a note of where that
// choice came from: $KUBEBUILDER_ASSETS if set, else $HYPERFLEET_K8S_ASSETS if set, else the cache directory that
// cmd/hyperfleet-dev/k8sassets/build.sh fills, ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/k8s/<KubernetesVersion>.
func AssetsDir() (dir, source string) {
	if v := os.Getenv(EnvAssets); v != "" {
		return v, "from " + EnvAssets
	}
	if v := os.Getenv(EnvBuildDir); v != "" {
		return v, "from " + EnvBuildDir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "~"
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "hyperfleet", "k8s", KubernetesVersion), "the default cache directory"
}

// checkAssets reports which of the binaries dir lacks, or nil when both are there and executable.
func checkAssets(dir string) error {
	var problems []string
	for _, name := range []string{"etcd", "kube-apiserver"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			problems = append(problems, name+" is missing")
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			problems = append(problems, name+" is not an executable file")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, ", "))
}

func newEnv(cfg *rest.Config, kubeconfig []byte) (*Env, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return &Env{Config: cfg, Dynamic: dyn, Clientset: cs, Kubeconfig: kubeconfig}, nil
}

// User returns a config that reaches the API server as the user name in groups, with no rights but what RBAC
// grants that user: the API server authorizes with RBAC. A ServiceAccount's rights are tested as the user
// "system:serviceaccount:<namespace>:<name>" in the group "system:serviceaccounts".
func (e *Env) User(tb testing.TB, name string, groups ...string) *rest.Config {
	tb.Helper()
	user, err := e.plane.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		tb.Fatalf("kubeenv: adding user %s: %v", name, err)
	}
	return user.Config()
}

// WriteKubeconfig writes Kubeconfig to a file in a directory that tb removes at its end and returns the file's
// path, for binaries started with --kubeconfig.
func (e *Env) WriteKubeconfig(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, e.Kubeconfig, 0o600); err != nil {
		tb.Fatalf("kubeenv: writing kubeconfig: %v", err)
	}
	return path
}

// Namespace creates a namespace with a generated name starting with prefix and returns its name. Tests sharing
// an Env use one each so that they cannot see each other's objects. The namespace is not deleted: no namespace
// controller runs to finish a deletion, and the whole Env goes away with the test.
func (e *Env) Namespace(tb testing.TB, prefix string) string {
	tb.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata":   map[string]any{"generateName": prefix + "-"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := e.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).
		Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("kubeenv: creating namespace %s-*: %v", prefix, err)
	}
	return got.GetName()
}
