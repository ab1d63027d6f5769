package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// namespaces are where the manifests put things: HyperFleet's own, and HyperShift's for the applier's rights.
var namespaces = []string{"hyperfleet", "clusters"}

func TestKustomizationsBuild(t *testing.T) {
	tests := []struct {
		dir       string
		wantKinds []string
	}{
		{dir: ".", wantKinds: []string{"Namespace", "Deployment", "Service", "ServiceMonitor",
			"PodDisruptionBudget", "HorizontalPodAutoscaler", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "PrometheusRule",
			"Job", "NetworkPolicy"}},
		{dir: "hyperfleet", wantKinds: []string{"Namespace", "Deployment", "PrometheusRule"}},
		{dir: "management-cluster", wantKinds: []string{"ServiceAccount", "Role", "RoleBinding"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			var kinds []string
			for _, obj := range render(t, filepath.Join(deployDir, tt.dir)) {
				kinds = append(kinds, obj.GetKind())
			}
			require.Subset(t, kinds, tt.wantKinds)
		})
	}
}

// TestEverythingIsLabelledAndNamespaced checks what `kubectl get -l` and `kubectl delete -k` rely on.
func TestEverythingIsLabelledAndNamespaced(t *testing.T) {
	for _, obj := range render(t, deployDir) {
		t.Run(obj.GetKind()+"/"+obj.GetName(), func(t *testing.T) {
			labels := obj.GetLabels()
			require.Equal(t, "hyperfleet", labels["app.kubernetes.io/part-of"])
			if obj.GetKind() == "Namespace" {
				require.Contains(t, namespaces, obj.GetName())
				return
			}
			require.NotEmpty(t, labels["app.kubernetes.io/name"], "every object names its component")
			require.Contains(t, []string{"api", "adapter", "monitoring", "network"}, labels["app.kubernetes.io/component"])
			require.Contains(t, namespaces, obj.GetNamespace(), "cluster-scoped objects are not expected here")
		})
	}
}

// TestPodTemplatesAreRestricted checks every container against the restricted Pod Security Standard and for the
// resources the scheduler and the autoscaler need. The namespace enforces the standard too, and the dry run in
// TestManifestsApplyToKubeAPIServer fails on the API server's warnings; this says which field is wrong.
func TestPodTemplatesAreRestricted(t *testing.T) {
	for _, w := range workloads(t, render(t, deployDir)) {
		t.Run(w.String(), func(t *testing.T) {
			pod := w.pod.SecurityContext
			require.NotNil(t, pod, "pod securityContext")
			require.Equal(t, new(true), pod.RunAsNonRoot, "runAsNonRoot")
			require.Equal(t, new(int64(65532)), pod.RunAsUser, "the image's user")
			require.Equal(t, new(int64(65532)), pod.RunAsGroup, "the image's group")
			require.NotNil(t, pod.SeccompProfile, "seccompProfile")
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SeccompProfile.Type)
			require.False(t, w.pod.HostNetwork || w.pod.HostPID || w.pod.HostIPC, "host namespaces")
			for _, v := range w.pod.Volumes {
				require.Nil(t, v.HostPath, "volume %s is a hostPath", v.Name)
			}
			require.Equal(t, w.obj.GetLabels()["app.kubernetes.io/name"], w.labels["app.kubernetes.io/name"], "pods carry the component's name")

			for _, c := range w.containers() {
				sc := c.SecurityContext
				require.NotNil(t, sc, "%s: securityContext", c.Name)
				require.Equal(t, new(false), sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation", c.Name)
				require.Equal(t, new(true), sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", c.Name)
				require.Equal(t, new(true), sc.RunAsNonRoot, "%s: runAsNonRoot", c.Name)
				require.Nil(t, sc.Privileged, "%s: privileged", c.Name)
				require.NotNil(t, sc.Capabilities, "%s: capabilities", c.Name)
				require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s: capabilities.drop", c.Name)
				require.Empty(t, sc.Capabilities.Add, "%s: capabilities.add", c.Name)
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					require.Contains(t, c.Resources.Requests, r, "%s: requests.%s", c.Name, r)
					require.Contains(t, c.Resources.Limits, r, "%s: limits.%s", c.Name, r)
				}
				require.Contains(t, mountPaths(c), "/tmp", "%s: a writable /tmp on a read-only root", c.Name)
			}
		})
	}
}

// TestProbesUseNamedPorts checks that every long-running container has startup, liveness and readiness probes on
// a port it declares: a probe on a port nothing listens on restarts the pod forever, and without a startup probe
// liveness may kill a pod in the middle of a long start (the API's re-aggregation).
func TestProbesUseNamedPorts(t *testing.T) {
	for _, w := range workloads(t, render(t, deployDir)) {
		if w.obj.GetKind() == "Job" {
			continue // runs to completion
		}
		for _, c := range w.pod.Containers {
			t.Run(w.String()+"/"+c.Name, func(t *testing.T) {
				for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
					require.NotNil(t, p, "%s probe", name)
					require.NotNil(t, p.HTTPGet, "%s probe is an HTTP GET", name)
					require.True(t, slices.ContainsFunc(c.Ports, func(port corev1.ContainerPort) bool {
						return port.Name == p.HTTPGet.Port.String() && p.HTTPGet.Port.StrVal != ""
					}), "%s probe's port %s is none of the container's named ports", name, p.HTTPGet.Port.String())
				}
			})
		}
	}
}

// TestShardedAdaptersLeaseTheirShards checks that every sharded adapter is a Deployment whose replicas lease their
// shards from the API (docs/shard-leases.md): --shard-leases, a --shard-count that does not depend on the
// replicas (so scaling is only replicas), no --shard-index, each replica named by its pod, rolled one at a time,
// and a grace period that covers the drain and the hand-back.
func TestShardedAdaptersLeaseTheirShards(t *testing.T) {
	var sharded int
	for _, w := range workloads(t, render(t, deployDir)) {
		if w.obj.GetKind() != "Deployment" || !slices.Contains(w.pod.Containers[0].Args, "--shard-leases") {
			continue
		}
		sharded++
		t.Run(w.String(), func(t *testing.T) {
			require.Len(t, w.pod.Containers, 1)
			c := w.pod.Containers[0]
			flags := flagValues(c.Args)
			require.NotContains(t, flags, "--shard-index", "leases replace the ordinal")
			count, err := strconv.Atoi(flags["--shard-count"])
			require.NoError(t, err, "--shard-count")
			require.Positive(t, count)
			require.Equal(t, "$(POD_NAME)", flags["--replica"])
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" })
			require.GreaterOrEqual(t, i, 0, "no POD_NAME in the environment")
			from := c.Env[i].ValueFrom
			require.True(t, from != nil && from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.name", "POD_NAME must be the pod's name")
			var d appsv1.Deployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(w.obj.Object, &d))
			require.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
			require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
			require.Greater(t, *d.Spec.Template.Spec.TerminationGracePeriodSeconds, int64(35), "above --drain-timeout (30 s) and the hand-back")
		})
	}
	require.Equal(t, 3, sharded, "the resolver, the applier and the provisioner lease their shards")
	require.Empty(t, kinds(render(t, deployDir), "StatefulSet"), "no adapter needs an ordinal")
}

// TestApplierRBACIsTheAdaptersOwn keeps the one copy of the applier's RBAC that deploy/ needs (kustomize loads no
// file from outside a kustomization) identical to the one the applier's own tests run it with.
func TestApplierRBACIsTheAdaptersOwn(t *testing.T) {
	original, err := os.ReadFile(filepath.Join("..", "..", "adapters", "hostedcluster", "rbac.yaml"))
	require.NoError(t, err)
	cp, err := os.ReadFile(filepath.Join(deployDir, "management-cluster", "rbac.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(original), string(cp),
		"deploy/management-cluster/rbac.yaml differs from adapters/hostedcluster/rbac.yaml; copy it again:\n"+
			"    cp adapters/hostedcluster/rbac.yaml deploy/management-cluster/rbac.yaml")
}

func mountPaths(c corev1.Container) []string {
	var paths []string
	for _, m := range c.VolumeMounts {
		paths = append(paths, m.MountPath)
	}
	return paths
}

// flagValues maps each --flag=value argument to its value ("" for a bare --flag).
func flagValues(args []string) map[string]string {
	flags := map[string]string{}
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			name, value, _ := strings.Cut(a, "=")
			flags[name] = value
		}
	}
	return flags
}

// find returns the rendered object of kind and name, failing when there is none.
func find(tb testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	tb.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	tb.Fatalf("no %s/%s among the rendered objects", kind, name)
	return nil
}
