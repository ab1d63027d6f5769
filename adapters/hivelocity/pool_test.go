package hivelocity

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// poolObject returns a node pool named workers of the cluster prod, whose spec is given and whose cluster has
// the given spec.
func poolObject(spec, clusterSpec string) *adapter.Object {
	return &adapter.Object{Kind: "NodePool", ID: poolA, ParentID: cluster, Name: "workers", Generation: 1, Spec: json.RawMessage(spec),
		Parent: &adapter.Object{Kind: "Cluster", ID: cluster, Name: "prod", Spec: json.RawMessage(clusterSpec)}}
}

func TestPoolOf(t *testing.T) {
	withDomain := `{"version_stream":"s","hosted_cluster":{"dns":{"base_domain":"example.com."}}}`
	minimal := `{"replicas":2,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2"}}}`
	tests := []struct {
		name         string
		spec         string
		clusterSpec  string
		wantHostname string // of slot 1
		wantOS       string
		wantOff      time.Duration
		wantOn       time.Duration
		wantErr      bool
	}{
		{name: "defaults", spec: minimal, clusterSpec: withDomain, wantHostname: "workers-1.prod.example.com", wantOS: DefaultOSName,
			wantOff: DefaultReloadTimeoutPoweredOff, wantOn: DefaultReloadTimeoutPoweredOn},
		{name: "a cluster without a base domain uses the provisioner's", spec: minimal, clusterSpec: `{"version_stream":"s"}`,
			wantHostname: "workers-1.prod.nodes.example", wantOS: DefaultOSName, wantOff: DefaultReloadTimeoutPoweredOff, wantOn: DefaultReloadTimeoutPoweredOn},
		{name: "everything set",
			spec: `{"replicas":2,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2","os_name":"Debian 12.x","ssh_key_name":"ops",
				"userdata":"#cloud-config\n","selector":{"rack":"a"}}},"remediation":{"reload_timeout_powered_off":"90s","reload_timeout_powered_on":"1h"}}`,
			clusterSpec: withDomain, wantHostname: "workers-1.prod.example.com", wantOS: "Debian 12.x", wantOff: 90 * time.Second, wantOn: time.Hour},
		{name: "remediation block without values", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2"}},"remediation":{}}`,
			clusterSpec: withDomain, wantHostname: "workers-1.prod.example.com", wantOS: DefaultOSName, wantOff: DefaultReloadTimeoutPoweredOff, wantOn: DefaultReloadTimeoutPoweredOn},
		{name: "not JSON", spec: `[`, clusterSpec: withDomain, wantErr: true},
		{name: "no region", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1"}}}`, clusterSpec: withDomain, wantErr: true},
		{name: "a timeout that is not a duration", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"X"}},
			"remediation":{"reload_timeout_powered_on":"soon"}}`, clusterSpec: withDomain, wantErr: true},
		{name: "a host name that is not one", spec: minimal, clusterSpec: `{"hosted_cluster":{"dns":{"base_domain":"bad_domain"}}}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := poolOf(poolObject(tt.spec, tt.clusterSpec), "nodes.example")
			require.Equal(t, poolA, got.ID, "ids are read even from a spec that cannot be")
			require.Equal(t, cluster, got.ClusterID)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidSpec)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantHostname, got.Hostname(1, 0))
			require.Equal(t, tt.wantOS, got.OSName)
			require.Equal(t, tt.wantOff, got.OffTimeout)
			require.Equal(t, tt.wantOn, got.OnTimeout)
			require.Len(t, got.Spec, 12)
		})
	}
}

func TestSpecHash(t *testing.T) {
	base := specHash("Ubuntu 22.04", "ops", "#cloud-config\n")
	require.Equal(t, base, specHash("Ubuntu 22.04", "ops", "#cloud-config\n"), "stable")
	for name, other := range map[string]string{
		"os":                  specHash("Ubuntu 24.04", "ops", "#cloud-config\n"),
		"ssh key":             specHash("Ubuntu 22.04", "admin", "#cloud-config\n"),
		"user data":           specHash("Ubuntu 22.04", "ops", "#cloud-config\nx\n"),
		"text moved a field":  specHash("Ubuntu 22.04o", "ps", "#cloud-config\n"),
		"no ssh key any more": specHash("Ubuntu 22.04", "", "#cloud-config\n"),
	} {
		require.NotEqual(t, base, other, name)
	}
}

func TestResolveOS(t *testing.T) {
	offered := []string{"Ubuntu 20.x", "Ubuntu 22.x", "Ubuntu 24.x", "Debian 12.x", "Rocky Linux 9.x", "Flatcar Linux"}
	tests := []struct {
		want   string
		got    string
		wantOK bool
	}{
		{want: "Ubuntu 22.x", got: "Ubuntu 22.x", wantOK: true},
		{want: "ubuntu 22.X", got: "Ubuntu 22.x", wantOK: true},
		{want: "Ubuntu 22.04", got: "Ubuntu 22.x", wantOK: true},
		{want: "Rocky Linux 9.3", got: "Rocky Linux 9.x", wantOK: true},
		{want: "Flatcar Linux", got: "Flatcar Linux", wantOK: true},
		{want: "Ubuntu 18.04"},
		{want: "Debian 11"},
		{want: "Ubuntu"},
		{want: "Windows Server 2022"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got, ok := resolveOS(tt.want, offered)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.got, got)
		})
	}
}

func TestPoolLimits(t *testing.T) {
	const withDomain = `{"hosted_cluster":{"dns":{"base_domain":"prod.example.com"}}}`
	spec := func(replicas int, extra string) string {
		return fmt.Sprintf(`{"replicas":%d,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2"}}%s}`, replicas, extra)
	}
	tests := []struct {
		name                       string
		spec                       string
		wantUnavailable, wantSurge int
		wantUnhealthy              int
		wantErr                    bool
	}{
		{name: "defaults", spec: spec(5, ""), wantUnavailable: 1, wantSurge: 0, wantUnhealthy: 1},
		{name: "numbers", spec: spec(5, `,"max_unavailable":2,"max_surge":1,"remediation":{"max_unhealthy":3}`), wantUnavailable: 2, wantSurge: 1, wantUnhealthy: 3},
		{name: "unavailable rounds down", spec: spec(5, `,"max_unavailable":"50%"`), wantUnavailable: 2, wantUnhealthy: 1},
		{name: "unavailable at least 1 without surge", spec: spec(3, `,"max_unavailable":"10%"`), wantUnavailable: 1, wantUnhealthy: 1},
		{name: "unavailable may be 0 with surge", spec: spec(3, `,"max_unavailable":"10%","max_surge":"10%"`), wantUnavailable: 0, wantSurge: 1, wantUnhealthy: 1},
		{name: "surge rounds up", spec: spec(5, `,"max_surge":"25%"`), wantUnavailable: 1, wantSurge: 2, wantUnhealthy: 1},
		{name: "unhealthy percentage at least 1", spec: spec(3, `,"remediation":{"max_unhealthy":"10%"}`), wantUnavailable: 1, wantUnhealthy: 1},
		{name: "unhealthy 0 remediates none", spec: spec(3, `,"remediation":{"max_unhealthy":0}`), wantUnavailable: 1, wantUnhealthy: 0},
		{name: "both zero", spec: spec(3, `,"max_unavailable":0,"max_surge":0`), wantErr: true},
		{name: "not a percentage", spec: spec(3, `,"max_surge":"lots"`), wantErr: true},
		{name: "over 100%", spec: spec(3, `,"max_surge":"120%"`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := poolOf(poolObject(tt.spec, withDomain), "nodes.example")
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidSpec)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantUnavailable, got.MaxUnavailable, "max_unavailable")
			require.Equal(t, tt.wantSurge, got.MaxSurge, "max_surge")
			require.Equal(t, tt.wantUnhealthy, got.MaxUnhealthy, "max_unhealthy")
		})
	}
}

func TestHostnameGenerations(t *testing.T) {
	p := Pool{Name: "workers", Cluster: "prod", Domain: "example.com"}
	require.Equal(t, "workers-3.prod.example.com", p.Hostname(3, 0))
	require.Equal(t, "workers-3-g2.prod.example.com", p.Hostname(3, 2))
}
