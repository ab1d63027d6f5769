package schema_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
)

const (
	clusterSpec  = "ClusterSpec"
	nodePoolSpec = "NodePoolSpec"
)

func loadDocument(tb testing.TB) *schema.Document {
	tb.Helper()
	doc, err := schema.Load(openapi.Document())
	require.NoError(tb, err)
	return doc
}

func loadSpec(tb testing.TB, doc *schema.Document, component string) *schema.Spec {
	tb.Helper()
	spec, err := doc.Spec(component)
	require.NoError(tb, err)
	return spec
}

// decode parses a JSON object the way the API's handlers do.
func decode(tb testing.TB, s string) map[string]any {
	tb.Helper()
	var v map[string]any
	require.NoError(tb, json.Unmarshal([]byte(s), &v))
	return v
}

// hivelocity is a valid NodePoolSpec platform.hivelocity without os_name.
const hivelocity = `{"device_type": "d1", "region": "LAX2"}`

func TestSpecUnknown(t *testing.T) {
	doc := loadDocument(t)
	_, err := doc.Spec("Nope")
	require.ErrorIs(t, err, schema.ErrUnknownSchema)
	require.ErrorContains(t, err, `"Nope"`)
}

func TestValidate(t *testing.T) {
	doc := loadDocument(t)
	services11 := `[` + strings.Repeat(`{"service": "APIServer", "type": "Route"},`, 2) +
		`{"service": "APIServer", "type": "Bad"},` + strings.Repeat(`{"service": "APIServer", "type": "Route"},`, 7) +
		`{"service": "APIServer", "type": "Bad"}]`
	tests := []struct {
		name      string
		component string
		value     string
		want      []schema.Violation
	}{
		{name: "minimal cluster", component: clusterSpec, value: `{"version_stream": "stable"}`},
		{
			name:      "full cluster",
			component: clusterSpec,
			value: `{"version_stream": "stable-4-16", "upgrade_schedule": "weekends", "hosted_cluster": {
				"dns": {"base_domain": "example.com"}, "issuer_url": "https://issuer", "fips": true,
				"controller_availability_policy": "SingleReplica", "infrastructure_availability_policy": "HighlyAvailable",
				"ssh_public_key": "ssh-ed25519 AAAA", "platform": {"type": "Agent", "agent": {"agent_namespace": "agents"}},
				"networking": {"network_type": "Other", "cluster_network": [{"cidr": "10.0.0.0/8", "host_prefix": 23}],
					"service_network": [{"cidr": "172.30.0.0/16"}], "machine_network": [{"cidr": "192.168.0.0/24"}]},
				"etcd": {"management_type": "Managed", "storage_size": "16Gi", "storage_class_name": "fast"},
				"infra_id": "prod-1", "pull_secret_name": "prod-pull", "node_selector": {"role": "hcp"},
				"tolerations": [{"key": "hcp", "operator": "Exists", "effect": "NoSchedule"}],
				"configuration": {"proxy": {"httpProxy": "http://proxy:3128"}},
				"services": [{"service": "APIServer", "type": "NodePort", "address": "10.0.0.1", "port": 30000},
					{"service": "OAuthServer", "type": "Route", "hostname": "oauth.example.com"},
					{"service": "Konnectivity", "type": "Route"}, {"service": "Ignition", "type": "LoadBalancer"}]}}`,
		},
		{
			name:      "required",
			component: clusterSpec,
			value:     `{}`,
			want:      []schema.Violation{{Field: "version_stream", Message: "is required"}},
		},
		{
			name:      "unknown fields at root and nested, null values included",
			component: clusterSpec,
			value:     `{"version_stream": "s", "zzz": null, "aaa": 1, "hosted_cluster": {"dns": {"base_domain": "x", "ttl": 5}}}`,
			want: []schema.Violation{
				{Field: "aaa", Message: "unknown field"},
				{Field: "hosted_cluster.dns.ttl", Message: "unknown field"},
				{Field: "zzz", Message: "unknown field"},
			},
		},
		{
			name:      "enum",
			component: clusterSpec,
			value:     `{"version_stream": "s", "hosted_cluster": {"platform": {"type": "AWS"}}}`,
			want:      []schema.Violation{{Field: "hosted_cluster.platform.type", Message: "must be one of [None Agent KubeVirt]"}},
		},
		{
			name:      "pattern",
			component: clusterSpec,
			value:     `{"version_stream": "Not_DNS"}`,
			want:      []schema.Violation{{Field: "version_stream", Message: "must match the pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}},
		},
		{
			name:      "minLength and pattern on one field keep their order",
			component: clusterSpec,
			value:     `{"version_stream": ""}`,
			want: []schema.Violation{
				{Field: "version_stream", Message: "must be at least 1 characters long"},
				{Field: "version_stream", Message: "must match the pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
			},
		},
		{
			name:      "maxLength",
			component: clusterSpec,
			value:     `{"version_stream": "s", "hosted_cluster": {"dns": {"base_domain": "` + strings.Repeat("a", 254) + `"}}}`,
			want:      []schema.Violation{{Field: "hosted_cluster.dns.base_domain", Message: "must be at most 253 characters long"}},
		},
		{
			name:      "types",
			component: clusterSpec,
			value:     `{"version_stream": 5, "hosted_cluster": {"fips": "yes", "services": {}, "dns": [], "platform": "None"}}`,
			want: []schema.Violation{
				{Field: "hosted_cluster.dns", Message: "must be an object"},
				{Field: "hosted_cluster.fips", Message: "must be a boolean"},
				{Field: "hosted_cluster.platform", Message: "must be an object"},
				{Field: "hosted_cluster.services", Message: "must be an array"},
				{Field: "version_stream", Message: "must be a string"},
			},
		},
		{
			name:      "null",
			component: clusterSpec,
			value:     `{"version_stream": null, "hosted_cluster": null}`,
			want: []schema.Violation{
				{Field: "hosted_cluster", Message: "must not be null"},
				{Field: "version_stream", Message: "must not be null"},
			},
		},
		{
			name:      "array items",
			component: clusterSpec,
			value: `{"version_stream": "s", "hosted_cluster": {"services": [
				{"service": "APIServer", "type": "Route", "weight": 1}, {"service": "APIServer"},
				{"service": "APIServer", "type": "Ingress"}, [1], null]}}`,
			want: []schema.Violation{
				{Field: "hosted_cluster.services[0].weight", Message: "unknown field"},
				{Field: "hosted_cluster.services[1].type", Message: "is required"},
				{Field: "hosted_cluster.services[2].type", Message: "must be one of [LoadBalancer NodePort Route]"},
				{Field: "hosted_cluster.services[3]", Message: "must be an object"},
				{Field: "hosted_cluster.services[4]", Message: "must not be null"},
			},
		},
		{
			name:      "indexes sort numerically",
			component: clusterSpec,
			value:     `{"version_stream": "s", "hosted_cluster": {"services": ` + services11 + `}}`,
			want: []schema.Violation{
				{Field: "hosted_cluster.services", Message: "must have at most 6 items"},
				{Field: "hosted_cluster.services[2].type", Message: "must be one of [LoadBalancer NodePort Route]"},
				{Field: "hosted_cluster.services[10].type", Message: "must be one of [LoadBalancer NodePort Route]"},
			},
		},
		{
			name:      "integer bounds in nested arrays",
			component: clusterSpec,
			value: `{"version_stream": "s", "hosted_cluster": {"networking": {"cluster_network": [
				{"cidr": "10.0.0.0/8", "host_prefix": 0}, {"cidr": "fd00::/48", "host_prefix": 129}]},
				"tolerations": [{"toleration_seconds": 1.5}]}}`,
			want: []schema.Violation{
				{Field: "hosted_cluster.networking.cluster_network[0].host_prefix", Message: "must be >= 1"},
				{Field: "hosted_cluster.networking.cluster_network[1].host_prefix", Message: "must be <= 128"},
				{Field: "hosted_cluster.tolerations[0].toleration_seconds", Message: "must be an integer"},
			},
		},
		{
			name:      "node pool",
			component: nodePoolSpec,
			value: `{"replicas": 3, "platform": {"hivelocity": {"device_type": "d1", "region": "LAX2", "os_name": "Ubuntu",
				"selector": {"rack": "a"}, "ssh_key_name": "k", "userdata": "#cloud-config"}},
				"remediation": {"reload_timeout_powered_off": "5m", "reload_timeout_powered_on": "1h"}}`,
		},
		{
			name:      "node pool required",
			component: nodePoolSpec,
			value:     `{"platform": {"hivelocity": {}}}`,
			want: []schema.Violation{
				{Field: "platform.hivelocity.device_type", Message: "is required"},
				{Field: "platform.hivelocity.region", Message: "is required"},
				{Field: "replicas", Message: "is required"},
			},
		},
		{name: "replicas minimum", component: nodePoolSpec, value: `{"replicas": -1, "platform": {"hivelocity": ` + hivelocity + `}}`,
			want: []schema.Violation{{Field: "replicas", Message: "must be >= 0"}}},
		{name: "replicas maximum", component: nodePoolSpec, value: `{"replicas": 1001, "platform": {"hivelocity": ` + hivelocity + `}}`,
			want: []schema.Violation{{Field: "replicas", Message: "must be <= 1000"}}},
		{name: "replicas huge", component: nodePoolSpec, value: `{"replicas": 1e308, "platform": {"hivelocity": ` + hivelocity + `}}`,
			want: []schema.Violation{{Field: "replicas", Message: "must be <= 1000"}}},
		{
			name:      "replicas fractional and negative",
			component: nodePoolSpec,
			value:     `{"replicas": -0.5, "platform": {"hivelocity": ` + hivelocity + `}}`,
			want: []schema.Violation{
				{Field: "replicas", Message: "must be an integer"},
				{Field: "replicas", Message: "must be >= 0"},
			},
		},
		{name: "replicas string", component: nodePoolSpec, value: `{"replicas": "3", "platform": {"hivelocity": ` + hivelocity + `}}`,
			want: []schema.Violation{{Field: "replicas", Message: "must be an integer"}}},
		{
			name:      "additionalProperties schema and internal pattern",
			component: nodePoolSpec,
			value: `{"replicas": 1, "platform": {"hivelocity": {"device_type": "d", "region": "r", "selector": {"rack": 7}}},
				"remediation": {"reload_timeout_powered_on": "40 minutes"}}`,
			want: []schema.Violation{
				{Field: "platform.hivelocity.selector.rack", Message: "must be a string"},
				{Field: "remediation.reload_timeout_powered_on", Message: "must be at most 8 characters long"},
				{Field: "remediation.reload_timeout_powered_on", Message: "must match the pattern ^[1-9][0-9]{0,5}(s|m|h)$"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := loadSpec(t, doc, tt.component)
			value := decode(t, tt.value)
			before := decode(t, tt.value)
			got := spec.Validate(value)
			require.Equal(t, tt.want, got)
			require.Equal(t, before, value, "Validate must not modify the value")
		})
	}
}

func TestApplyDefaults(t *testing.T) {
	doc := loadDocument(t)
	hostedDefaults := `"fips": false, "controller_availability_policy": "HighlyAvailable",
		"infrastructure_availability_policy": "SingleReplica",
		"platform": {"type": "None"},
		"networking": {"network_type": "OVNKubernetes", "cluster_network": [{"cidr": "10.132.0.0/14"}],
			"service_network": [{"cidr": "172.31.0.0/16"}]},
		"etcd": {"management_type": "Managed", "storage_size": "8Gi"},
		"services": [{"service": "APIServer", "type": "Route"}, {"service": "OAuthServer", "type": "Route"},
			{"service": "Konnectivity", "type": "Route"}, {"service": "Ignition", "type": "Route"}]`
	tests := []struct {
		name      string
		component string
		value     string
		want      string
	}{
		{
			name:      "no hosted_cluster: it defaults to {} and is filled in",
			component: clusterSpec,
			value:     `{"version_stream": "s"}`,
			want:      `{"version_stream": "s", "hosted_cluster": {` + hostedDefaults + `}}`,
		},
		{
			name:      "empty hosted_cluster",
			component: clusterSpec,
			value:     `{"version_stream": "s", "hosted_cluster": {}}`,
			want:      `{"version_stream": "s", "hosted_cluster": {` + hostedDefaults + `}}`,
		},
		{
			name:      "null counts as absent",
			component: clusterSpec,
			value:     `{"version_stream": "s", "hosted_cluster": {"platform": null, "networking": null, "etcd": null, "services": null}}`,
			want:      `{"version_stream": "s", "hosted_cluster": {` + hostedDefaults + `}}`,
		},
		{
			name:      "given values kept",
			component: clusterSpec,
			value: `{"version_stream": "s", "hosted_cluster": {"fips": true, "platform": {"type": "Agent"},
				"etcd": {"storage_size": "1Ti"}, "services": [{"service": "APIServer", "type": "NodePort"}]}}`,
			want: `{"version_stream": "s", "hosted_cluster": {"fips": true, "platform": {"type": "Agent"},
				"controller_availability_policy": "HighlyAvailable", "infrastructure_availability_policy": "SingleReplica",
				"networking": {"network_type": "OVNKubernetes", "cluster_network": [{"cidr": "10.132.0.0/14"}],
					"service_network": [{"cidr": "172.31.0.0/16"}]},
				"etcd": {"storage_size": "1Ti"}, "services": [{"service": "APIServer", "type": "NodePort"}]}}`,
		},
		{
			name:      "node pool",
			component: nodePoolSpec,
			value:     `{"replicas": 1, "platform": {"hivelocity": ` + hivelocity + `}}`,
			want: `{"replicas": 1, "platform": {"hivelocity": {"device_type": "d1", "region": "LAX2", "os_name": "Ubuntu 22.04"}},
				"remediation": {"reload_timeout_powered_off": "10m", "reload_timeout_powered_on": "40m"}}`,
		},
		{
			name:      "node pool values kept",
			component: nodePoolSpec,
			value: `{"replicas": 1, "platform": {"hivelocity": {"device_type": "d", "region": "r", "os_name": "Rocky 9"}},
				"remediation": {"reload_timeout_powered_on": "2h"}}`,
			want: `{"replicas": 1, "platform": {"hivelocity": {"device_type": "d", "region": "r", "os_name": "Rocky 9"}},
				"remediation": {"reload_timeout_powered_on": "2h"}}`,
		},
		{
			name:      "invalid values do not stop defaults",
			component: nodePoolSpec,
			value:     `{"replicas": "many", "extra": 1, "platform": {"hivelocity": {}}}`,
			want: `{"replicas": "many", "extra": 1, "platform": {"hivelocity": {"os_name": "Ubuntu 22.04"}},
				"remediation": {"reload_timeout_powered_off": "10m", "reload_timeout_powered_on": "40m"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := loadSpec(t, doc, tt.component)
			value := decode(t, tt.value)
			require.NoError(t, spec.ApplyDefaults(value))
			require.Equal(t, decode(t, tt.want), value)
		})
	}

	t.Run("defaults are copies", func(t *testing.T) {
		spec := loadSpec(t, doc, clusterSpec)
		first := decode(t, `{"version_stream": "s", "hosted_cluster": {}}`)
		require.NoError(t, spec.ApplyDefaults(first))
		first["hosted_cluster"].(map[string]any)["etcd"].(map[string]any)["storage_size"] = "1Mi"
		first["hosted_cluster"].(map[string]any)["services"].([]any)[0].(map[string]any)["type"] = "Route"

		second := decode(t, `{"version_stream": "s", "hosted_cluster": {}}`)
		require.NoError(t, spec.ApplyDefaults(second))
		require.Equal(t, decode(t, `{"version_stream": "s", "hosted_cluster": {`+hostedDefaults+`}}`), second)
		require.Empty(t, spec.Validate(second))
	})

	t.Run("nil map", func(t *testing.T) {
		require.Error(t, loadSpec(t, doc, nodePoolSpec).ApplyDefaults(nil))
	})
}

func TestInternalFields(t *testing.T) {
	doc := loadDocument(t)
	tests := []struct {
		name      string
		component string
		value     string
		want      []string
	}{
		{name: "public fields only", component: clusterSpec,
			value: `{"version_stream": "s", "hosted_cluster": {"dns": {"base_domain": "x"}, "fips": true, "ssh_public_key": "k"}}`},
		{name: "empty", component: clusterSpec, value: `{}`},
		{
			name:      "every internal field, children not reported",
			component: clusterSpec,
			value: `{"version_stream": "s", "hosted_cluster": {"services": [], "platform": {"type": "None"},
				"networking": {"network_type": "Other"}, "etcd": {}, "fips": false}}`,
			want: []string{"hosted_cluster.etcd", "hosted_cluster.networking", "hosted_cluster.platform", "hosted_cluster.services"},
		},
		{
			name:      "merge patch nulls count as present",
			component: clusterSpec,
			value:     `{"hosted_cluster": {"platform": null, "etcd": null, "dns": null}}`,
			want:      []string{"hosted_cluster.etcd", "hosted_cluster.platform"},
		},
		{name: "null parent", component: clusterSpec, value: `{"hosted_cluster": null}`},
		{name: "unexpected shapes", component: clusterSpec, value: `{"hosted_cluster": ["platform"], "platform": {}}`},
		{name: "node pool remediation", component: nodePoolSpec,
			value: `{"replicas": 1, "remediation": {"reload_timeout_powered_on": "1h"}, "platform": {"hivelocity": {"os_name": "x"}}}`,
			want:  []string{"remediation"}},
		{name: "node pool remediation null", component: nodePoolSpec, value: `{"remediation": null}`, want: []string{"remediation"}},
		{name: "node pool public fields", component: nodePoolSpec,
			value: `{"replicas": 1, "platform": {"hivelocity": {"os_name": "x", "selector": {"remediation": "y"}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := loadSpec(t, doc, tt.component)
			got := spec.InternalFields(decode(t, tt.value))
			require.Equal(t, tt.want, got)
			require.True(t, spec.HasInternal())

			// StripInternal removes exactly what InternalFields finds, and nothing else.
			value := decode(t, tt.value)
			require.Equal(t, len(tt.want) > 0, spec.StripInternal(value))
			require.Empty(t, spec.InternalFields(value))
			original := decode(t, tt.value)
			for key, v := range value {
				if _, isObject := v.(map[string]any); !isObject {
					require.Equal(t, original[key], v, "public member %s is kept as it was", key)
				}
			}
		})
	}
}

func TestPublic(t *testing.T) {
	doc := loadDocument(t)
	yamlDoc, jsonDoc, err := doc.Public()
	require.NoError(t, err)

	// hosted_cluster is inline in ClusterSpec (so that it can have a default); the others are components.
	removed := map[string][]string{
		"ClusterSpec.hosted_cluster": {"platform", "networking", "etcd", "services"},
		"NodePoolSpec":               {"remediation"},
	}
	kept := map[string][]string{
		"ClusterSpec.hosted_cluster": {"dns", "fips", "ssh_public_key"},
		"NodePoolSpec":               {"replicas", "platform"},
	}
	for format, raw := range map[string][]byte{"yaml": yamlDoc, "json": jsonDoc} {
		t.Run(format, func(t *testing.T) {
			require.NotContains(t, string(raw), schema.InternalExtension)
			public, err := schema.Load(raw)
			require.NoError(t, err, "the public document must be a valid OpenAPI document")
			schemas := componentSchemas(t, raw)
			for component, names := range removed {
				sch := schemaAt(t, schemas, component)
				props := sch["properties"].(map[string]any)
				for _, name := range names {
					require.NotContains(t, props, name, "%s.%s", component, name)
					if required, ok := sch["required"]; ok {
						require.NotContains(t, required, name, "%s.required", component)
					}
				}
				for _, name := range kept[component] {
					require.Contains(t, props, name, "%s.%s", component, name)
				}
			}
			// Without the internal properties, the public schemas reject them as unknown fields.
			spec := loadSpec(t, public, nodePoolSpec)
			require.Equal(t,
				[]schema.Violation{{Field: "remediation", Message: "unknown field"}},
				spec.Validate(decode(t, `{"replicas": 1, "platform": {"hivelocity": `+hivelocity+`}, "remediation": {}}`)))
		})
	}

	t.Run("YAML and JSON agree", func(t *testing.T) {
		var fromYAML, fromJSON any
		require.NoError(t, yaml.Unmarshal(yamlDoc, &fromYAML))
		require.NoError(t, json.Unmarshal(jsonDoc, &fromJSON))
		normalised, err := json.Marshal(fromYAML)
		require.NoError(t, err)
		require.JSONEq(t, string(jsonDoc), string(normalised))
	})

	t.Run("callers get copies", func(t *testing.T) {
		yamlDoc[0], jsonDoc[0] = 'X', 'X'
		yamlAgain, jsonAgain, err := doc.Public()
		require.NoError(t, err)
		require.NotEqual(t, byte('X'), yamlAgain[0])
		require.NotEqual(t, byte('X'), jsonAgain[0])
	})

	t.Run("the source keeps its internal fields", func(t *testing.T) {
		require.Contains(t, string(openapi.Document()), schema.InternalExtension)
	})
}

// componentSchemas returns components/schemas of a YAML or JSON document.
func componentSchemas(tb testing.TB, raw []byte) map[string]map[string]any {
	tb.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(tb, yaml.Unmarshal(raw, &doc)) // JSON is YAML
	return doc.Components.Schemas
}

// TestConcurrentUse lets the race detector check that a Document's Specs need no locking.
func TestConcurrentUse(t *testing.T) {
	doc := loadDocument(t)
	spec := loadSpec(t, doc, clusterSpec)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			value := decode(t, `{"version_stream": "Bad", "hosted_cluster": {"etcd": null, "services": [{}]}}`)
			require.NotEmpty(t, spec.Validate(value))
			require.NoError(t, spec.ApplyDefaults(value))
			require.Len(t, spec.InternalFields(value), 4)
			_, _, err := doc.Public()
			require.NoError(t, err)
		})
	}
	wg.Wait()
}

// FuzzValidate feeds arbitrary JSON objects to every method that takes a value: none may panic, Validate must
// explain each violation and leave the value alone, and defaults must keep a valid value valid.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`null`,
		`{"version_stream": "s", "hosted_cluster": {}}`,
		`{"version_stream": null, "hosted_cluster": {"services": [[[]], null, {"type": 1e308}], "platform": null}}`,
		`{"hosted_cluster": {"networking": {"cluster_network": [{"host_prefix": -1e308}, "x", [{}]]}}, "x": {"y": [1]}}`,
		`{"replicas": 1, "platform": {"hivelocity": {"device_type": "d", "region": "r", "selector": {"a": [null]}}}}`,
		`{"replicas": 123456789012345678901234567890, "platform": {"hivelocity": []}, "remediation": "now"}`,
	} {
		f.Add([]byte(seed))
	}
	doc := loadDocument(f)
	specs := []*schema.Spec{loadSpec(f, doc, clusterSpec), loadSpec(f, doc, nodePoolSpec)}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, spec := range specs {
			var value, before map[string]any
			if json.Unmarshal(data, &value) != nil {
				return
			}
			require.NoError(t, json.Unmarshal(data, &before))

			violations := spec.Validate(value)
			require.Equal(t, before, value, "Validate must not modify the value")
			for _, v := range violations {
				require.NotEmpty(t, v.Message, "violation at %q", v.Field)
			}
			spec.InternalFields(value)

			err := spec.ApplyDefaults(value)
			if value == nil {
				require.Error(t, err)
				continue
			}
			require.NoError(t, err)
			if len(violations) == 0 {
				require.Empty(t, spec.Validate(value), "defaults made a valid value invalid")
			}
			spec.InternalFields(value)
		}
	})
}

// schemaAt finds a component schema, or with "Component.prop" the inline schema of one of its properties.
func schemaAt(tb testing.TB, schemas map[string]map[string]any, path string) map[string]any {
	tb.Helper()
	component, prop, nested := strings.Cut(path, ".")
	sch := schemas[component]
	require.NotNil(tb, sch, path)
	if !nested {
		return sch
	}
	inline, ok := sch["properties"].(map[string]any)[prop].(map[string]any)
	require.True(tb, ok, path)
	return inline
}

func TestImmutableFields(t *testing.T) {
	doc := loadDocument(t)
	tests := []struct {
		component string
		want      []string
	}{
		{clusterSpec, []string{
			"hosted_cluster.controller_availability_policy", "hosted_cluster.dns.base_domain", "hosted_cluster.etcd",
			"hosted_cluster.fips", "hosted_cluster.infra_id", "hosted_cluster.issuer_url", "hosted_cluster.networking",
			"hosted_cluster.platform", "hosted_cluster.services", "placement",
		}},
		{nodePoolSpec, []string{"platform.hivelocity.device_type", "platform.hivelocity.region", "platform.hivelocity.selector"}},
	}
	for _, tt := range tests {
		t.Run(tt.component, func(t *testing.T) {
			require.Equal(t, tt.want, loadSpec(t, doc, tt.component).ImmutableFields())
		})
	}
}

// The internal fields of the kinds sit at fixed paths, which lets a list leave them out as PostgreSQL reads the
// rows; every path named is one InternalFields reports.
func TestInternalPaths(t *testing.T) {
	doc := loadDocument(t)
	tests := []struct {
		component string
		want      [][]string
	}{
		{clusterSpec, [][]string{{"hosted_cluster", "etcd"}, {"hosted_cluster", "networking"}, {"hosted_cluster", "platform"}, {"hosted_cluster", "services"}}},
		{nodePoolSpec, [][]string{{"remediation"}}},
	}
	for _, tt := range tests {
		t.Run(tt.component, func(t *testing.T) {
			paths, ok := loadSpec(t, doc, tt.component).InternalPaths()
			require.True(t, ok)
			require.Equal(t, tt.want, paths)
		})
	}
}
