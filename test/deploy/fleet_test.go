package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// managementClustersExample is the example of the applier's Secret of kubeconfigs, kept out of the kustomization
// so that `kubectl apply -k` never overwrites the real one.
var managementClustersExample = filepath.Join(deployDir, "hyperfleet", "hostedcluster-applier", "management-clusters.example.yaml")

// exampleSecret returns the example Secret, as the API server would get it from `kubectl apply -f`.
func exampleSecret(tb testing.TB) *unstructured.Unstructured {
	tb.Helper()
	raw, err := os.ReadFile(managementClustersExample)
	require.NoError(tb, err)
	obj := &unstructured.Unstructured{}
	require.NoError(tb, yaml.UnmarshalStrict(raw, &obj.Object))
	return obj
}

// TestPlacerRunsAlone checks what docs/management-clusters.md relies on: one placer decides, so its Deployment has
// one replica, replaces it with Recreate (the old pod gone before the new one starts) and runs no shards.
func TestPlacerRunsAlone(t *testing.T) {
	var d appsv1.Deployment
	obj := find(t, render(t, deployDir), "Deployment", "cluster-placer")
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &d, true))
	require.NotNil(t, d.Spec.Replicas)
	require.Equal(t, int32(1), *d.Spec.Replicas)
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	flags := flagValues(d.Spec.Template.Spec.Containers[0].Args)
	require.NotContains(t, flags, "--shard-count")
	require.Equal(t, "/var/run/secrets/hyperfleet/token/token", flags["--token-file"])
}

// TestApplierMountsTheManagementClusters checks that the applier reads its kubeconfigs from the Secret the example
// and deploy/README.md name, where --management-cluster-credentials looks, and that every key of the example is a
// kubeconfig: the one of the cluster HyperFleet runs in reads the applier's own ServiceAccount token.
func TestApplierMountsTheManagementClusters(t *testing.T) {
	var d appsv1.Deployment
	obj := find(t, render(t, deployDir), "Deployment", "hostedcluster-applier")
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &d, true))
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	flags := flagValues(c.Args)
	dir := flags["--management-cluster-credentials"]
	require.Equal(t, "/var/run/hyperfleet/management-clusters", dir)
	require.NotContains(t, flags, "--kubeconfig", "--kubeconfig and --management-cluster-credentials exclude each other")

	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	require.GreaterOrEqual(t, i, 0, "nothing is mounted at %s", dir)
	require.True(t, c.VolumeMounts[i].ReadOnly)
	j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	require.GreaterOrEqual(t, j, 0)
	require.NotNil(t, pod.Volumes[j].Secret)
	require.False(t, pod.Volumes[j].Secret.Optional != nil && *pod.Volumes[j].Secret.Optional, "the pod waits for the Secret")

	secret := exampleSecret(t)
	require.Equal(t, "Secret", secret.GetKind())
	require.Equal(t, pod.Volumes[j].Secret.SecretName, secret.GetName())
	require.Equal(t, d.GetNamespace(), secret.GetNamespace())
	data, found, err := unstructured.NestedStringMap(secret.Object, "stringData")
	require.NoError(t, err)
	require.True(t, found)
	require.Contains(t, data, "local")
	for key, kubeconfig := range data {
		t.Run(key, func(t *testing.T) {
			cfg, err := clientcmd.Load([]byte(kubeconfig))
			require.NoError(t, err)
			ctx := cfg.Contexts[cfg.CurrentContext]
			require.NotNil(t, ctx, "current-context %q is none of its contexts", cfg.CurrentContext)
			require.Contains(t, cfg.AuthInfos, ctx.AuthInfo)
			require.Contains(t, cfg.Clusters, ctx.Cluster)
			require.Regexp(t, `^https://`, cfg.Clusters[ctx.Cluster].Server)
		})
	}
	local, err := clientcmd.Load([]byte(data["local"]))
	require.NoError(t, err)
	user := local.AuthInfos[local.Contexts[local.CurrentContext].AuthInfo]
	require.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", user.TokenFile)
	require.NotNil(t, pod.AutomountServiceAccountToken)
	require.True(t, *pod.AutomountServiceAccountToken, "the kubeconfig local reads the ServiceAccount token")
}
