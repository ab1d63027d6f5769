package kubeenv_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

const image = "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"

// TestEnv starts one environment and checks, in subtests, that it serves the HyperShift CRDs and enforces their
// real schema: defaults, OpenAPI validation and CEL rules.
func TestEnv(t *testing.T) {
	env := kubeenv.Start(t)

	t.Run("CRDs are served", func(t *testing.T) {
		rl, err := env.Clientset.Discovery().ServerResourcesForGroupVersion("hypershift.openshift.io/v1beta1")
		require.NoError(t, err)
		var names []string
		for _, r := range rl.APIResources {
			names = append(names, r.Name)
		}
		require.Subset(t, names, []string{"hostedclusters", "hostedclusters/status", "nodepools", "nodepools/status"})
	})

	t.Run("minimal HostedCluster is created with defaults", func(t *testing.T) {
		ns := env.Namespace(t, "minimal")
		got, err := hostedClusters(env, ns).Create(ctx(t), kubeenv.HostedCluster(ns, "hc", image), metav1.CreateOptions{})
		require.NoError(t, err)
		requireField(t, got, "Managed", "spec", "etcd", "managementType")
		requireField(t, got, "PersistentVolume", "spec", "etcd", "managed", "storage", "type")
		requireField(t, got, "OVNKubernetes", "spec", "networking", "networkType")
		requireField(t, got, image, "spec", "release", "image")
	})

	t.Run("server-side apply creates, updates and is idempotent", func(t *testing.T) {
		ns := env.Namespace(t, "apply")
		hc := kubeenv.HostedCluster(ns, "hc", image)
		created := apply(t, env, hc)
		require.Equal(t, created.GetResourceVersion(), apply(t, env, hc).GetResourceVersion(), "re-applying the same object must not write")

		hc.SetLabels(map[string]string{"hyperfleet.io/cluster-id": "c1"})
		clusterID := "3f1d2c9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f"
		require.NoError(t, unstructured.SetNestedField(hc.Object, clusterID, "spec", "clusterID"))
		upgrade := "quay.io/openshift-release-dev/ocp-release:4.16.4-x86_64"
		require.NoError(t, unstructured.SetNestedField(hc.Object, upgrade, "spec", "release", "image"))
		updated := apply(t, env, hc)
		require.NotEqual(t, created.GetResourceVersion(), updated.GetResourceVersion())
		requireField(t, updated, upgrade, "spec", "release", "image")
		requireField(t, updated, clusterID, "spec", "clusterID")
		require.Equal(t, "c1", updated.GetLabels()["hyperfleet.io/cluster-id"])
	})

	t.Run("invalid HostedClusters are rejected", func(t *testing.T) {
		ns := env.Namespace(t, "invalid")
		tests := []struct {
			name    string
			mutate  func(t *testing.T, hc *unstructured.Unstructured)
			message string
		}{
			{"GCP platform (TechPreviewNoUpgrade only)", func(t *testing.T, hc *unstructured.Unstructured) {
				setField(t, hc, "GCP", "spec", "platform", "type")
			}, `Unsupported value: "GCP"`},
			{"clusterID not a UUID", func(t *testing.T, hc *unstructured.Unstructured) {
				setField(t, hc, "not-a-uuid-but-exactly-36-characters", "spec", "clusterID")
			}, "clusterID must be an RFC4122 UUID"},
			{"fewer than four services", func(t *testing.T, hc *unstructured.Unstructured) {
				services, _, _ := unstructured.NestedSlice(hc.Object, "spec", "services")
				require.NoError(t, unstructured.SetNestedSlice(hc.Object, services[:3], "spec", "services"))
			}, "at least 4 items"},
			{"no release image", func(t *testing.T, hc *unstructured.Unstructured) {
				unstructured.RemoveNestedField(hc.Object, "spec", "release", "image")
			}, "spec.release.image: Required value"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				hc := kubeenv.HostedCluster(ns, "hc-"+string(rune('a'+i)), image)
				tt.mutate(t, hc)
				_, err := hostedClusters(env, ns).Create(ctx(t), hc, metav1.CreateOptions{})
				require.Error(t, err)
				require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
				require.ErrorContains(t, err, tt.message)

				_, err = hostedClusters(env, ns).Patch(ctx(t), hc.GetName(), types.ApplyPatchType, mustJSON(t, hc),
					metav1.PatchOptions{FieldManager: "kubeenv-test"})
				require.True(t, apierrors.IsInvalid(err), "server-side apply: want 422 Invalid, got %v", err)
			})
		}
	})

	t.Run("services are immutable", func(t *testing.T) {
		ns := env.Namespace(t, "immutable")
		hc := kubeenv.HostedCluster(ns, "hc", image)
		apply(t, env, hc)
		services, _, _ := unstructured.NestedSlice(hc.Object, "spec", "services")
		apiServer := services[0].(map[string]any)
		require.NoError(t, unstructured.SetNestedField(apiServer, "LoadBalancer", "servicePublishingStrategy", "type"))
		unstructured.RemoveNestedField(apiServer, "servicePublishingStrategy", "nodePort")
		require.NoError(t, unstructured.SetNestedSlice(hc.Object, services, "spec", "services"))

		_, err := hostedClusters(env, ns).Patch(ctx(t), "hc", types.ApplyPatchType, mustJSON(t, hc),
			metav1.PatchOptions{FieldManager: "kubeenv-test"})
		require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		require.ErrorContains(t, err, "Services is immutable")
	})

	t.Run("kubeconfig file reaches the API server", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", env.WriteKubeconfig(t))
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = cs.CoreV1().Namespaces().Get(ctx(t), "default", metav1.GetOptions{})
		require.NoError(t, err)
	})
}

func TestAssetsDir(t *testing.T) {
	tests := []struct {
		name              string
		assets, buildDir  string
		xdg, home         string
		want, wantSources string
	}{
		{"KUBEBUILDER_ASSETS wins", "/a", "/b", "/x", "/h", "/a", "from KUBEBUILDER_ASSETS"},
		{"then the build script's override", "", "/b", "/x", "/h", "/b", "from HYPERFLEET_K8S_ASSETS"},
		{"then XDG_CACHE_HOME", "", "", "/x", "/h", "/x/hyperfleet/k8s/" + kubeenv.KubernetesVersion, "the default cache directory"},
		{"then HOME/.cache", "", "", "", "/h", "/h/.cache/hyperfleet/k8s/" + kubeenv.KubernetesVersion, "the default cache directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(kubeenv.EnvAssets, tt.assets)
			t.Setenv(kubeenv.EnvBuildDir, tt.buildDir)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			got, source := kubeenv.AssetsDir()
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantSources, source)
		})
	}
}

func TestHostedClusterFixtureIsIndependent(t *testing.T) {
	a := kubeenv.HostedCluster("ns", "a", image)
	setField(t, a, "GCP", "spec", "platform", "type")
	b := kubeenv.HostedCluster("ns", "b", image)
	requireField(t, b, "None", "spec", "platform", "type")
}

func TestKubeconfigIsWrittenPrivately(t *testing.T) {
	env := &kubeenv.Env{Kubeconfig: []byte("apiVersion: v1\nkind: Config\n")}
	path := env.WriteKubeconfig(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.Equal(t, "kubeconfig", filepath.Base(path))
}

func hostedClusters(env *kubeenv.Env, ns string) dynamic.ResourceInterface {
	return env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns)
}

func apply(tb testing.TB, env *kubeenv.Env, hc *unstructured.Unstructured) *unstructured.Unstructured {
	tb.Helper()
	got, err := hostedClusters(env, hc.GetNamespace()).Patch(ctx(tb), hc.GetName(), types.ApplyPatchType, mustJSON(tb, hc),
		metav1.PatchOptions{FieldManager: "kubeenv-test"})
	require.NoError(tb, err)
	return got
}

func mustJSON(tb testing.TB, u *unstructured.Unstructured) []byte {
	tb.Helper()
	data, err := u.MarshalJSON()
	require.NoError(tb, err)
	return data
}

func setField(tb testing.TB, u *unstructured.Unstructured, value string, fields ...string) {
	tb.Helper()
	require.NoError(tb, unstructured.SetNestedField(u.Object, value, fields...))
}

func requireField(tb testing.TB, u *unstructured.Unstructured, want string, fields ...string) {
	tb.Helper()
	got, found, err := unstructured.NestedString(u.Object, fields...)
	require.NoError(tb, err)
	require.True(tb, found, "%v not set", fields)
	require.Equal(tb, want, got, "%v", fields)
}

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return c
}
