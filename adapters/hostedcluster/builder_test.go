package hostedcluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// builderCase is one spec variant a user may send, decoded from the API's JSON as the reconciler decodes it.
type builderCase struct {
	name string
	spec string // hosted_cluster, as the API stores it (defaults filled)
}

// apiDefaults is what the API stores for a cluster created with no hosted_cluster.
const apiDefaults = `"controller_availability_policy":"HighlyAvailable","infrastructure_availability_policy":"SingleReplica",
	"fips":false,"platform":{"type":"None"},"etcd":{"management_type":"Managed","storage_size":"8Gi"},
	"networking":{"network_type":"OVNKubernetes","cluster_network":[{"cidr":"10.132.0.0/14"}],"service_network":[{"cidr":"172.31.0.0/16"}]},
	"services":[{"service":"APIServer","type":"Route"},{"service":"OAuthServer","type":"Route"},{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]`

// builderCases are the variants golden-tested here and applied to the real CRD by the integration tests.
func builderCases() []builderCase {
	return []builderCase{
		{"defaults", `{` + apiDefaults + `}`},
		{"empty optional blocks", `{` + apiDefaults + `,"dns":{},"configuration":{},"tolerations":[],"node_selector":{}}`},
		{"agent platform", `{"controller_availability_policy":"SingleReplica","infrastructure_availability_policy":"HighlyAvailable",
			"fips":true,"platform":{"type":"Agent","agent":{"agent_namespace":"agents"}},"etcd":{"management_type":"Managed","storage_size":"16Gi","storage_class_name":"fast-ssd"},
			"networking":{"network_type":"OVNKubernetes","cluster_network":[{"cidr":"10.132.0.0/14"}],"service_network":[{"cidr":"172.31.0.0/16"}]},
			"services":[{"service":"APIServer","type":"Route"},{"service":"OAuthServer","type":"Route"},{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]}`},
		{"kubevirt platform", `{"controller_availability_policy":"HighlyAvailable","infrastructure_availability_policy":"SingleReplica","fips":false,
			"platform":{"type":"KubeVirt","kubevirt":{"base_domain_passthrough":true}},"etcd":{"management_type":"Managed","storage_size":"8Gi"},
			"networking":{"network_type":"OVNKubernetes","cluster_network":[{"cidr":"10.132.0.0/14"}],"service_network":[{"cidr":"172.31.0.0/16"}]},
			"services":[{"service":"APIServer","type":"Route"},{"service":"OAuthServer","type":"Route"},{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]}`},
		{"custom networks and services", `{"controller_availability_policy":"HighlyAvailable","infrastructure_availability_policy":"SingleReplica","fips":false,
			"platform":{"type":"None"},"etcd":{"management_type":"Managed","storage_size":"8Gi"},
			"networking":{"network_type":"Other","cluster_network":[{"cidr":"10.128.0.0/14","host_prefix":23},{"cidr":"fd01::/48","host_prefix":64}],
				"service_network":[{"cidr":"172.30.0.0/16"},{"cidr":"fd02::/112"}],"machine_network":[{"cidr":"192.168.10.0/24"}]},
			"services":[{"service":"APIServer","type":"NodePort","address":"10.0.0.10","port":30443},
				{"service":"OAuthServer","type":"Route","hostname":"oauth.prod.example.com"},
				{"service":"Konnectivity","type":"LoadBalancer","hostname":"konnectivity.prod.example.com"},
				{"service":"Ignition","type":"NodePort","address":"ignition.prod.example.com"}]}`},
		{"everything a user sets", `{` + apiDefaults + `,"dns":{"base_domain":"prod.example.com","public_zone_id":"Z1","private_zone_id":"Z2"},
			"issuer_url":"https://oidc.example.com/prod","infra_id":"prod-7f3a","ssh_public_key":"ssh-ed25519 AAAAC3Nza ops@example.com",
			"pull_secret_name":"prod-pull","node_selector":{"node-role.kubernetes.io/hcp":""},
			"tolerations":[{"key":"hcp","operator":"Exists","effect":"NoSchedule"},{"key":"dedicated","operator":"Equal","value":"prod","effect":"NoExecute","toleration_seconds":300}],
			"configuration":{"proxy":{"httpProxy":"http://proxy.example.com:3128","noProxy":".example.com"},
				"ingress":{"domain":"apps.prod.example.com"},"api_server":{"audit":{"profile":"WriteRequestBodies"}}}}`},
	}
}

func decodeHostedCluster(tb testing.TB, raw string) api.HostedClusterSpec {
	tb.Helper()
	var spec api.HostedClusterSpec
	require.NoError(tb, json.Unmarshal([]byte(raw), &spec))
	return spec
}

// TestBuildGolden compares what Build makes for each variant with testdata/golden/<variant>.yaml. Set
// HYPERFLEET_UPDATE_GOLDEN=1 to write the files after a deliberate change, and review the diff.
func TestBuildGolden(t *testing.T) {
	update := os.Getenv("HYPERFLEET_UPDATE_GOLDEN") != ""
	for _, tc := range builderCases() {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Build(&Desired{ClusterID: "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e5f", Name: "prod-east", Namespace: "clusters",
				Generation: 3, Spec: decodeHostedCluster(t, tc.spec), ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64",
				PullSecret: []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`)})
			require.NoError(t, err)
			var docs []byte
			for _, obj := range append(objs.Secrets, objs.HostedCluster) {
				raw, err := yaml.Marshal(obj.Object)
				require.NoError(t, err)
				docs = append(append(docs, "---\n"...), raw...)
			}
			path := filepath.Join("testdata", "golden", strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, docs, 0o600))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "no golden file: run with HYPERFLEET_UPDATE_GOLDEN=1 and review it")
			require.Equal(t, string(want), string(docs))
		})
	}
}

func TestBuildIsStableAndHashesWhatItApplies(t *testing.T) {
	desired := func(image string, generation int64) *Desired {
		return &Desired{ClusterID: "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e5f", Name: "c", Namespace: "clusters", Generation: generation,
			Spec: decodeHostedCluster(t, `{`+apiDefaults+`}`), ReleaseImage: image, PullSecret: []byte(`{"auths":{}}`)}
	}
	hash := func(d *Desired) string {
		objs, err := Build(d)
		require.NoError(t, err)
		return objs.HostedCluster.GetAnnotations()[AnnotationAppliedHash]
	}
	a := hash(desired("quay.io/x:4.16.3", 1))
	require.NotEmpty(t, a)
	require.Equal(t, a, hash(desired("quay.io/x:4.16.3", 1)), "the same input, the same hash")
	require.Equal(t, a, hash(desired("quay.io/x:4.16.3", 2)), "a new generation that changes nothing applied is no change")
	require.NotEqual(t, a, hash(desired("quay.io/x:4.16.4", 1)), "a new image is a change")
}
