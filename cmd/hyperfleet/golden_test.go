package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Resources as the API returns them, one or two per kind, at fixed times and ids.
const (
	goldenCluster1 = `{"id": "11111111-1111-4111-8111-111111111111", "kind": "Cluster", "href": "/api/hyperfleet/v1/clusters/11111111-1111-4111-8111-111111111111",
		"name": "demo", "labels": {"env": "dev"}, "generation": 2, "resource_version": "7",
		"spec": {"version_stream": "stable-4-16", "upgrade_schedule": "weekends", "hosted_cluster": {"dns": {"base_domain": "example.com"}}},
		"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Available", "status": "True"},
			{"type": "ClusterPlacerAvailable", "status": "True", "reason": "Placed", "message": "mc-a"}]},
		"created_time": "2026-01-01T00:00:00Z", "updated_time": "2026-01-01T00:30:00Z", "created_by": "alice", "updated_by": "alice",
		"adapter_statuses": [{"adapter": "hostedcluster-applier", "observed_generation": 2, "conditions": [{"type": "Available", "status": "True", "last_transition_time": "2026-01-01T00:40:00Z"}],
			"data": {"current_version": "4.16.3", "target_version": "4.16.5", "held_reason": "OutsideUpgradeWindow"},
			"created_time": "2026-01-01T00:05:00Z", "last_report_time": "2026-01-01T01:00:00Z", "observed_time": "2026-01-01T01:00:00Z"}]}`
	goldenCluster2 = `{"id": "22222222-2222-4222-8222-222222222222", "kind": "Cluster", "href": "/api/hyperfleet/v1/clusters/22222222-2222-4222-8222-222222222222",
		"name": "prod-east", "labels": {}, "generation": 1, "resource_version": "3",
		"spec": {"version_stream": "stable-4-16", "paused": true, "hosted_cluster": {"dns": {"base_domain": "example.com"}}},
		"status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False", "reason": "AdaptersMissing"}, {"type": "Available", "status": "Unknown"},
			{"type": "ClusterPlacerAvailable", "status": "False", "reason": "NoCapacity", "message": "no management cluster fits: mc-a: full (2/2 hosted clusters); mc-b: cordoned"}]},
		"created_time": "2026-01-01T01:00:00Z", "updated_time": "2026-01-01T01:00:00Z", "created_by": "bob", "updated_by": "bob",
		"adapter_statuses": [{"adapter": "hostedcluster-applier", "observed_generation": 1, "conditions": [],
			"data": {"current_version": "4.16.2", "target_version": "4.16.5", "upgrade_state": "Partial", "upgrade_version": "4.16.5"},
			"created_time": "2026-01-01T01:00:00Z", "last_report_time": "2026-01-01T01:01:00Z", "observed_time": "2026-01-01T01:01:00Z"}]}`
	goldenPool = `{"id": "33333333-3333-4333-8333-333333333333", "kind": "NodePool", "href": "/api/hyperfleet/v1/clusters/11111111-1111-4111-8111-111111111111/nodepools/33333333-3333-4333-8333-333333333333",
		"name": "workers", "labels": {}, "generation": 1, "resource_version": "4",
		"owner_references": {"id": "11111111-1111-4111-8111-111111111111", "kind": "Cluster", "href": "/api/hyperfleet/v1/clusters/11111111-1111-4111-8111-111111111111"},
		"spec": {"replicas": 3, "platform": {"hivelocity": {"device_type": "s1.small", "region": "LAX2"}}},
		"status": {"phase": "Progressing", "conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning"}]},
		"created_time": "2025-12-30T22:00:00Z", "updated_time": "2026-01-01T00:00:00Z", "created_by": "alice", "updated_by": "alice"}`
	goldenStream = `{"id": "44444444-4444-4444-8444-444444444444", "kind": "VersionStream", "href": "/api/hyperfleet/v1/versionstreams/44444444-4444-4444-8444-444444444444",
		"name": "stable-4-16", "labels": {}, "generation": 1, "resource_version": "2",
		"spec": {"target_version": "4.16", "channel_group": "stable", "arch": "amd64"},
		"status": {"phase": "Ready", "conditions": [{"type": "Available", "status": "True"}]},
		"created_time": "2025-11-01T00:00:00Z", "updated_time": "2025-11-01T00:00:00Z", "created_by": "ops", "updated_by": "ops"}`
	goldenSchedule = `{"id": "55555555-5555-4555-8555-555555555555", "kind": "UpgradeSchedule", "href": "/api/hyperfleet/v1/upgradeschedules/55555555-5555-4555-8555-555555555555",
		"name": "weekends", "labels": {}, "generation": 1, "resource_version": "1",
		"spec": {"timezone": "Europe/Berlin", "windows": [{"days": ["Saturday", "Sunday"], "start": "02:00", "duration": "4h"}, {"days": ["Wednesday"], "start": "22:00", "duration": "90m"}]},
		"status": {"phase": "Ready", "conditions": []},
		"created_time": "2026-01-01T01:02:00Z", "updated_time": "2026-01-01T01:02:00Z", "created_by": "ops", "updated_by": "ops"}`
)

// Management clusters: one serving with room, one cordoned that the applier cannot reach.
const (
	goldenManagementClusterA = `{"id": "66666666-6666-4666-8666-666666666666", "kind": "ManagementCluster", "href": "/api/hyperfleet/v1/managementclusters/66666666-6666-4666-8666-666666666666",
		"name": "mc-a", "labels": {"tier": "gold"}, "generation": 1, "resource_version": "5",
		"spec": {"region": "us-east-1", "schedulable": true, "namespace": "clusters", "capacity": {"max_hosted_clusters": 2}, "credentials": {"kubeconfig": "mc-a"}},
		"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Available", "status": "True"},
			{"type": "HostedclusterApplierAvailable", "status": "True", "reason": "Reachable", "message": "1/2 hosted clusters"}]},
		"created_time": "2025-12-01T00:00:00Z", "updated_time": "2025-12-01T00:00:00Z", "created_by": "ops", "updated_by": "ops"}`
	goldenManagementClusterB = `{"id": "77777777-7777-4777-8777-777777777777", "kind": "ManagementCluster", "href": "/api/hyperfleet/v1/managementclusters/77777777-7777-4777-8777-777777777777",
		"name": "mc-b", "labels": {}, "generation": 2, "resource_version": "8",
		"spec": {"region": "us-east-1", "schedulable": false, "namespace": "clusters", "capacity": {"max_hosted_clusters": 40, "vcpu": 256, "memory_gib": 1024}, "credentials": {"kubeconfig": "mc-b-2026"}},
		"status": {"phase": "Progressing", "conditions": [{"type": "Ready", "status": "False", "reason": "AdaptersNotAvailable"}, {"type": "Available", "status": "False"},
			{"type": "HostedclusterApplierAvailable", "status": "False", "reason": "Unreachable", "message": "dial tcp 10.0.0.7:6443: connect: connection refused"}]},
		"created_time": "2026-01-01T00:02:03Z", "updated_time": "2026-01-01T00:50:00Z", "created_by": "ops", "updated_by": "ops"}`
)

// goldenNow is when the golden tables are drawn: ages count from it.
var goldenNow = time.Date(2026, 1, 1, 1, 2, 3, 0, time.UTC) //nolint:gochecknoglobals // a constant time; Go has no time constants

// Every output format, for the kinds' tables and for a list and a single resource, against files in
// testdata/golden. HYPERFLEET_UPDATE_GOLDEN=1 rewrites the files from what the printers print.
func TestGoldenOutput(t *testing.T) {
	kinds := api.Kinds()
	listOf := func(t *testing.T, k *api.Kind, single bool, raws ...string) *listing {
		t.Helper()
		l := &listing{kind: k, single: single, envelope: page{Kind: k.Name + "List", Page: 1, Size: 20, Total: int64(len(raws)), ResourceVersion: "9"},
			parents: map[uuid.UUID]string{uuid.MustParse("11111111-1111-4111-8111-111111111111"): "demo"}}
		l.reports, _ = reportColumns(kinds, k)
		for _, raw := range raws {
			o, err := decodeObject([]byte(raw))
			require.NoError(t, err)
			l.objects = append(l.objects, o)
		}
		return l
	}
	tests := []struct {
		name, output string
		noHeaders    bool
		listing      func(t *testing.T) *listing
	}{
		{"clusters.table", "table", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.no-headers", "table", true, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.wide", "wide", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.json", "json", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.yaml", "yaml", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.name", "name", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.jsonpath", `jsonpath={range .items[*]}{.name}{"\t"}{.status.phase}{"\n"}{end}`, false,
			func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.go-template", `go-template={{range .items}}{{.name}} {{.spec.version_stream}} {{index .labels "env"}}{{"\n"}}{{end}}`, false,
			func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"clusters.custom-columns", "custom-columns=NAME:.name,STREAM:.spec.version_stream,READY:{.status.conditions[?(@.type==\"Ready\")].status}", false,
			func(t *testing.T) *listing { return listOf(t, kinds.Cluster, false, goldenCluster1, goldenCluster2) }},
		{"cluster.json", "json", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, true, goldenCluster1) }},
		{"cluster.yaml", "yaml", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, true, goldenCluster1) }},
		{"cluster.jsonpath", "jsonpath={.spec.hosted_cluster.dns.base_domain}", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, true, goldenCluster1) }},
		{"cluster.go-template", "go-template={{.name}} is {{.status.phase}}", false, func(t *testing.T) *listing { return listOf(t, kinds.Cluster, true, goldenCluster1) }},
		{"nodepools.table", "table", false, func(t *testing.T) *listing { return listOf(t, kinds.NodePool, false, goldenPool) }},
		{"nodepools.wide", "wide", false, func(t *testing.T) *listing { return listOf(t, kinds.NodePool, false, goldenPool) }},
		{"versionstreams.table", "table", false, func(t *testing.T) *listing { return listOf(t, kinds.VersionStream, false, goldenStream) }},
		{"versionstreams.wide", "wide", false, func(t *testing.T) *listing { return listOf(t, kinds.VersionStream, false, goldenStream) }},
		{"upgradeschedules.table", "table", false, func(t *testing.T) *listing { return listOf(t, kinds.UpgradeSchedule, false, goldenSchedule) }},
		{"upgradeschedules.wide", "wide", false, func(t *testing.T) *listing { return listOf(t, kinds.UpgradeSchedule, false, goldenSchedule) }},
		{"managementclusters.table", "table", false, func(t *testing.T) *listing {
			return listOf(t, kinds.ManagementCluster, false, goldenManagementClusterA, goldenManagementClusterB)
		}},
		{"managementclusters.wide", "wide", false, func(t *testing.T) *listing {
			return listOf(t, kinds.ManagementCluster, false, goldenManagementClusterA, goldenManagementClusterB)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPrinter(tc.output, tc.noHeaders)
			require.NoError(t, err)
			var out bytes.Buffer
			require.NoError(t, p.print(&out, tc.listing(t), goldenNow))
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			if os.Getenv("HYPERFLEET_UPDATE_GOLDEN") != "" {
				require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "no golden file: run with HYPERFLEET_UPDATE_GOLDEN=1 and check what it wrote")
			require.Equal(t, string(want), out.String())
		})
	}
}
