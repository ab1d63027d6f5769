package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadManifests(t *testing.T) {
	in := "# leading comment\n---\nkind: cluster\nname: a\nspec: {version_stream: s}\n--- # second\n{\"kind\": \"np\", \"name\": \"b\", \"cluster\": \"a\", \"labels\": {\"x\": null}}\n---\n\n"
	docs, err := readManifests("-", strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, docs, 2)
	require.Equal(t, "cluster", docs[0].Kind)
	require.JSONEq(t, `{"version_stream": "s"}`, string(docs[0].Spec))
	require.Equal(t, "stdin, document 2", docs[0].source)
	require.Equal(t, "a", docs[1].cluster())
	require.Nil(t, docs[1].Labels["x"])
	require.Empty(t, docs[1].presentLabels())

	for _, bad := range []string{"", "# nothing\n", "kind: cluster\ncolour: a\n", "kind: [\n"} {
		_, err := readManifests("-", strings.NewReader(bad))
		var uerr *usageError
		require.ErrorAs(t, err, &uerr, bad)
	}
}

func TestParseLabels(t *testing.T) {
	got, err := parseLabels("a=1, b=, c-", true)
	require.NoError(t, err)
	raw, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, `{"a": "1", "b": "", "c": null}`, string(raw))
	_, err = parseLabels("c-", false)
	require.Error(t, err, "removing is for patch")
}

func TestApplyPatch(t *testing.T) {
	current, err := decodeObject([]byte(`{"id": "7d4fbd4e-7c5c-4e43-a3c9-1e0d7b2a5a10", "kind": "NodePool", "href": "x", "name": "p",
		"labels": {"env": "dev"}, "spec": {"replicas": 3, "platform": {"hivelocity": {"device_type": "s1", "region": "LAX2", "os_name": "Ubuntu"}},
		"remediation": {"reload_timeout_powered_off": "10m"}}}`))
	require.NoError(t, err)
	v := "prod"
	tests := []struct {
		name string
		doc  manifest
		want string // "" for no change
	}{
		{"what get printed", manifest{Labels: map[string]*string{"env": ptr("dev")},
			Spec: json.RawMessage(`{"replicas": 3, "platform": {"hivelocity": {"device_type": "s1", "region": "LAX2", "os_name": "Ubuntu"}}, "remediation": {"reload_timeout_powered_off": "10m"}}`)}, ""},
		{"the same spec without labels leaves the labels alone", manifest{
			Spec: json.RawMessage(`{"replicas": 3, "platform": {"hivelocity": {"device_type": "s1", "region": "LAX2", "os_name": "Ubuntu"}}, "remediation": {"reload_timeout_powered_off": "10m"}}`)}, ""},
		// The file is the whole desired spec: what it leaves out goes (and the API defaults it again).
		{"a spec with less", manifest{Spec: json.RawMessage(`{"replicas": 3, "platform": {"hivelocity": {"device_type": "s1", "region": "LAX2"}}}`)},
			`{"spec": {"platform": {"hivelocity": {"os_name": null}}, "remediation": null}}`},
		{"a change", manifest{Spec: json.RawMessage(`{"replicas": 5, "platform": {"hivelocity": {"device_type": "s1", "region": "LAX2", "os_name": "Ubuntu"}}, "remediation": {"reload_timeout_powered_off": "10m"}}`)},
			`{"spec": {"replicas": 5}}`},
		{"labels are replaced whole", manifest{Labels: map[string]*string{"team": &v}}, `{"labels": {"env": null, "team": "prod"}}`},
		{"a label changed", manifest{Labels: map[string]*string{"env": &v}}, `{"labels": {"env": "prod"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyPatch(current, &tc.doc)
			require.NoError(t, err)
			if tc.want == "" {
				require.Nil(t, got, "patch: %s", got)
				return
			}
			require.JSONEq(t, tc.want, string(got))
		})
	}
}
