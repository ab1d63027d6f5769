package deploy

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// PostgreSQL's default max_connections, and what the connection budget leaves to others: its 3
// superuser_reserved_connections, the migrate Job and init containers (1 each while they run), an operator's psql
// and a backup (deploy/README.md, "Database connections").
const (
	maxConnections      = 100
	reservedConnections = 12
	// feedPoolConns is each API replica's change-feed pool (internal/postgres.OpenFeedPool), beside its request pool.
	feedPoolConns = 4
)

// TestDeployRequiredAdaptersOnlyInTheMigrateJob checks that the required adapters have one writer: the
// hyperfleet-migrate Job. An API container given them would either write them (and restart every replica on a
// rollout) or be refused when they change.
func TestDeployRequiredAdaptersOnlyInTheMigrateJob(t *testing.T) {
	checkRequiredAdaptersOnlyInTheMigrateJob(t, render(t, deployDir))
}

func checkRequiredAdaptersOnlyInTheMigrateJob(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var writers []string
	for _, w := range workloads(t, objs) {
		for _, c := range w.containers() {
			if _, ok := flagValues(c.Args)["--required-adapters"]; ok {
				writers = append(writers, w.String()+"/"+c.Name)
				require.Equal(t, "migrate", c.Args[0], "%s/%s: only migrate sets the required adapters", w, c.Name)
			}
		}
	}
	require.Equal(t, []string{"Job/hyperfleet-migrate/migrate"}, writers)
}

// TestDeployNetworkPolicies checks that the API port is open to the ingress controller's namespace and the adapters
// only, every metrics port to Prometheus's namespace only, and that each port a policy names is a port of the
// pods it selects.
func TestDeployNetworkPolicies(t *testing.T) {
	checkNetworkPolicies(t, render(t, deployDir), "ingress-nginx", "monitoring")
}

func checkNetworkPolicies(t *testing.T, objs []*unstructured.Unstructured, ingressNS, monitoringNS string) {
	t.Helper()
	policies := kinds(objs, "NetworkPolicy")
	require.NotEmpty(t, policies)
	ws := workloads(t, objs)
	// allowed[pod name label][port name] = the namespaces (or "pods:<component>") allowed in.
	allowed := map[string]map[string][]string{}
	denyAll := false
	for _, obj := range policies {
		var np networkingv1.NetworkPolicy
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &np, true))
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, np.Name)
		sel, err := labels.ValidatedSelectorFromSet(np.Spec.PodSelector.MatchLabels)
		require.NoError(t, err)
		if len(np.Spec.PodSelector.MatchLabels) == 0 {
			require.Empty(t, np.Spec.Ingress, "%s selects every pod: it may only deny", np.Name)
			denyAll = true
			continue
		}
		var selected []workload
		for _, w := range ws {
			if sel.Matches(labels.Set(w.labels)) {
				selected = append(selected, w)
			}
		}
		require.NotEmpty(t, selected, "%s selects no pod", np.Name)
		for _, rule := range np.Spec.Ingress {
			var from []string
			for _, peer := range rule.From {
				switch {
				case peer.NamespaceSelector != nil:
					require.Nil(t, peer.PodSelector, "%s: a peer by namespace only", np.Name)
					from = append(from, peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				case peer.PodSelector != nil:
					from = append(from, "pods:"+peer.PodSelector.MatchLabels["app.kubernetes.io/component"])
				}
			}
			require.NotEmpty(t, from, "%s: a rule without from lets everyone in", np.Name)
			require.NotEmpty(t, rule.Ports, "%s: a rule without ports opens every port", np.Name)
			for _, p := range rule.Ports {
				for _, w := range selected {
					require.True(t, slices.ContainsFunc(w.pod.Containers[0].Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.Port.StrVal }),
						"%s: port %s is not a named port of %s", np.Name, p.Port.String(), w)
					name := w.labels["app.kubernetes.io/name"]
					if allowed[name] == nil {
						allowed[name] = map[string][]string{}
					}
					allowed[name][p.Port.StrVal] = append(allowed[name][p.Port.StrVal], from...)
				}
			}
		}
	}
	require.True(t, denyAll, "a policy denies every pod's ingress that the others do not allow")
	require.ElementsMatch(t, []string{ingressNS, "pods:adapter"}, allowed["hyperfleet-api"]["http"], "who reaches the API")
	require.Equal(t, []string{monitoringNS}, allowed["hyperfleet-api"]["metrics"], "who reaches the API's metrics")
	for _, w := range ws {
		if w.labels["app.kubernetes.io/component"] == "adapter" {
			require.Equal(t, map[string][]string{"ops": {monitoringNS}}, allowed[w.labels["app.kubernetes.io/name"]],
				"%s: only Prometheus reaches the adapter's metrics", w)
		}
	}
}

// TestDeployConnectionBudget checks the arithmetic of deploy/README.md, "Database connections": at the autoscaler's
// maxReplicas, every API replica's pools together stay within the database's connections less those reserved.
func TestDeployConnectionBudget(t *testing.T) {
	checkConnectionBudget(t, render(t, deployDir))
}

func checkConnectionBudget(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	hpa := find(t, objs, "HorizontalPodAutoscaler", "hyperfleet-api")
	// kustomize's objects hold an int, the chart's (from YAML through JSON) an int64.
	v, found, err := unstructured.NestedFieldNoCopy(hpa.Object, "spec", "maxReplicas")
	require.NoError(t, err)
	require.True(t, found)
	maxReplicas, err := strconv.Atoi(fmt.Sprint(v))
	require.NoError(t, err)
	var pool int
	for _, w := range workloads(t, objs) {
		for _, c := range w.pod.Containers {
			if path.Base(c.Command[0]) == "hyperfleet-api" && c.Args[0] == "serve" {
				pool, err = strconv.Atoi(flagValues(c.Args)["--db-max-open-connections"])
				require.NoError(t, err, "the API sets --db-max-open-connections (its default, 50, fits no budget)")
			}
		}
	}
	require.Positive(t, pool)
	require.LessOrEqual(t, maxReplicas*(pool+feedPoolConns), maxConnections-reservedConnections,
		"maxReplicas %d × (pool %d + feed %d) exceeds max_connections %d − %d reserved", maxReplicas, pool, feedPoolConns,
		maxConnections, reservedConnections)
}
