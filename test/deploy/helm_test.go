package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/engine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// chartDir is charts/hyperfleet seen from this package's directory.
var chartDir = filepath.Join("..", "..", "charts", "hyperfleet")

// chartNamespace is where the tests install the chart, the namespace deploy/hyperfleet uses.
const chartNamespace = "hyperfleet"

// renderChart renders the chart with values over its defaults as `helm install hyperfleet charts/hyperfleet -n
// hyperfleet` would (hooks included) and returns its objects in the namespace, in file order.
func renderChart(tb testing.TB, values map[string]any) []*unstructured.Unstructured {
	tb.Helper()
	chrt, err := loader.Load(chartDir)
	require.NoError(tb, err)
	vals, err := util.ToRenderValues(chrt, values, common.ReleaseOptions{Name: "hyperfleet", Namespace: chartNamespace,
		Revision: 1, IsInstall: true}, nil)
	require.NoError(tb, err)
	files, err := engine.Render(chrt, vals)
	require.NoError(tb, err)
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(files[name]), 4096)
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(tb, err, "%s:\n%s", name, files[name])
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			require.NoError(tb, u.UnmarshalJSON(raw), "%s: %s", name, raw)
			u.SetNamespace(chartNamespace) // what helm's -n does; the chart has namespaced objects only
			objs = append(objs, u)
		}
	}
	require.NotEmpty(tb, objs)
	return objs
}

// kustomizeHash is the suffix kustomize gives a generated ConfigMap's name.
var kustomizeHash = regexp.MustCompile(`-[a-z0-9]{10}$`)

// kindNames returns "Kind/name" of each object but those of the kinds left out, sorted.
func kindNames(objs []*unstructured.Unstructured, leaveOut ...string) []string {
	var out []string
	for _, obj := range objs {
		if slices.Contains(leaveOut, obj.GetKind()) {
			continue
		}
		name := obj.GetName()
		if obj.GetKind() == "ConfigMap" {
			name = kustomizeHash.ReplaceAllString(name, "")
		}
		out = append(out, obj.GetKind()+"/"+name)
	}
	slices.Sort(out)
	return out
}

// TestHelmChartIsTheKustomizeBase keeps the chart and deploy/hyperfleet from drifting apart: with default values the
// chart yields the same objects, by kind and name, as the kustomize base, but the Namespace (which a chart does not
// own: its Secrets and the migrate hook need it first). The pod templates are held to the same rules.
func TestHelmChartIsTheKustomizeBase(t *testing.T) {
	chart := renderChart(t, nil)
	require.Equal(t, kindNames(render(t, filepath.Join(deployDir, "hyperfleet")), "Namespace"), kindNames(chart))
	checkRequiredAdaptersOnlyInTheMigrateJob(t, chart)
	checkNetworkPolicies(t, chart, "ingress-nginx", "monitoring")
	checkConnectionBudget(t, chart)
	for _, obj := range chart {
		require.Equal(t, "hyperfleet", obj.GetLabels()["app.kubernetes.io/part-of"], "%s/%s", obj.GetKind(), obj.GetName())
	}
	// The same arguments, container by container: a flag added to one and not the other fails here.
	base := map[string][]string{}
	for _, w := range workloads(t, render(t, filepath.Join(deployDir, "hyperfleet"))) {
		for _, c := range w.containers() {
			base[w.String()+"/"+c.Name] = c.Args
		}
	}
	for _, w := range workloads(t, chart) {
		for _, c := range w.containers() {
			require.Equal(t, base[w.String()+"/"+c.Name], c.Args, "%s/%s", w, c.Name)
		}
	}
}

// TestHelmValues checks that each value the chart documents changes what it says.
func TestHelmValues(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		check  func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{
			name:   "image",
			values: map[string]any{"image": map[string]any{"repository": "registry.example.com/hyperfleet", "tag": "v1.2.3"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, w := range workloads(t, objs) {
					for _, c := range w.containers() {
						require.Equal(t, "registry.example.com/hyperfleet:v1.2.3", c.Image, "%s/%s", w, c.Name)
					}
				}
			},
		},
		{
			name:   "required adapters",
			values: map[string]any{"requiredAdapters": "cluster=hostedcluster-applier"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				job := workloads(t, kinds(objs, "Job"))[0]
				require.Equal(t, "cluster=hostedcluster-applier", flagValues(job.pod.Containers[0].Args)["--required-adapters"])
				checkRequiredAdaptersOnlyInTheMigrateJob(t, objs)
			},
		},
		{
			name: "auth and database",
			values: map[string]any{
				"auth":     map[string]any{"jwtIssuer": "https://issuer.example.com", "tenantClaim": "org_id"},
				"database": map[string]any{"secretName": "my-db", "sslMode": "verify-ca", "maxOpenConnections": 10},
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				data, _, _ := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "hyperfleet-api").Object, "data")
				require.Equal(t, "https://issuer.example.com", data["HYPERFLEET_JWT_ISSUER"])
				require.Equal(t, "org_id", data["HYPERFLEET_TENANT_CLAIM"])
				require.Equal(t, "verify-ca", data["HYPERFLEET_DB_SSLMODE"])
				job := workloads(t, kinds(objs, "Job"))[0]
				env := map[string]string{}
				for _, e := range job.pod.Containers[0].Env {
					env[e.Name] = e.Value
				}
				require.Equal(t, data, env, "the migrate hook gets the ConfigMap's settings inline")
				for _, w := range workloads(t, objs) {
					if w.obj.GetName() == "hyperfleet-api" || w.obj.GetName() == "hyperfleet-migrate" {
						require.Equal(t, "my-db", w.pod.Volumes[0].Secret.SecretName, w.String())
					}
				}
				checkConnectionBudget(t, objs)
			},
		},
		{
			name: "adapters off",
			values: map[string]any{"adapters": map[string]any{
				"hivelocityProvisioner": map[string]any{"enabled": false}, "clusterPlacer": map[string]any{"enabled": false}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, obj := range objs {
					require.NotContains(t, []string{"hivelocity-provisioner", "cluster-placer"}, obj.GetName(), obj.GetKind())
				}
				find(t, objs, "Deployment", "version-resolver")
				find(t, objs, "Deployment", "hostedcluster-applier")
			},
		},
		{
			name:   "replicas and shards",
			values: map[string]any{"adapters": map[string]any{"versionResolver": map[string]any{"replicas": 3, "shards": 32}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, w := range workloads(t, kinds(objs, "Deployment")) {
					if w.obj.GetName() == "version-resolver" {
						require.Equal(t, int32(3), *w.replicas)
						flags := flagValues(w.pod.Containers[0].Args)
						require.Equal(t, "32", flags["--shard-count"])
						require.Contains(t, w.pod.Containers[0].Args, "--shard-leases")
					}
				}
			},
		},
		{
			name:   "network policy namespaces",
			values: map[string]any{"networkPolicy": map[string]any{"ingressNamespace": "openshift-ingress", "monitoringNamespace": "openshift-monitoring"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				checkNetworkPolicies(t, objs, "openshift-ingress", "openshift-monitoring")
			},
		},
		{
			name: "no network policy or service monitors",
			values: map[string]any{"networkPolicy": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": false},
				"prometheusRule": map[string]any{"enabled": false}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				require.Empty(t, kinds(objs, "NetworkPolicy"))
				require.Empty(t, kinds(objs, "ServiceMonitor"))
				require.Empty(t, kinds(objs, "PrometheusRule"))
			},
		},
		{
			name:   "alert rules for a selecting Prometheus",
			values: map[string]any{"prometheusRule": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack"}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				rule := find(t, objs, "PrometheusRule", "hyperfleet")
				require.Equal(t, "kube-prometheus-stack", rule.GetLabels()["release"])
				groups, found, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, alertGroups(t), groups, "the chart ships deploy/alerts/hyperfleet.rules.yaml's groups")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, renderChart(t, tt.values))
		})
	}
}

// TestHelmChartAppliesToKubeAPIServer gives the chart's objects, rendered with default values and with every
// optional value set, to a real kube-apiserver as TestManifestsApplyToKubeAPIServer does deploy/'s: a server-side
// dry run with strict field validation in a namespace that enforces the restricted Pod Security Standard.
func TestHelmChartAppliesToKubeAPIServer(t *testing.T) {
	env := kubeenv.Start(t)
	for _, crd := range []string{serviceMonitorCRD, prometheusRuleCRD} {
		installCRD(t, env, moduleFile(t, prometheusOperator, crd))
	}
	var warnings warningRecorder
	resource := resourceClient(t, env, &warnings)
	ns := find(t, render(t, filepath.Join(deployDir, "hyperfleet")), "Namespace", chartNamespace)
	_, err := resource(t, ns).Create(t.Context(), ns, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)

	for name, values := range map[string]map[string]any{
		"defaults": nil,
		"every value": {
			"image":    map[string]any{"repository": "registry.example.com/hyperfleet", "tag": "v1.2.3", "pullPolicy": "Always"},
			"auth":     map[string]any{"tenantClaim": "org_id"},
			"database": map[string]any{"sslMode": "verify-ca"},
			"api":      map[string]any{"extraEnv": map[string]any{"HYPERFLEET_RATE_LIMIT": "50"}},
			"adapters": map[string]any{"hivelocityProvisioner": map[string]any{"replicas": 2}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dryRunCreate(t, resource, &warnings, renderChart(t, values))
		})
	}
}

// The chart's README documents every top-level value.
func TestHelmReadmeNamesEveryValue(t *testing.T) {
	chrt, err := loader.Load(chartDir)
	require.NoError(t, err)
	vals, err := util.ToRenderValues(chrt, nil, common.ReleaseOptions{Name: "hyperfleet", Namespace: chartNamespace}, nil)
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	values, ok := vals["Values"].(common.Values)
	require.True(t, ok)
	for key := range values {
		require.True(t, bytes.Contains(readme, []byte("`"+key)), "charts/hyperfleet/README.md does not document %s", key)
	}
}
