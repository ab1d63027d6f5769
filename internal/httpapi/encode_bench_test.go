package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// BenchmarkEncodeListPage measures what the API spends turning a page of 100 clusters, as a list reads them
// (conditions still raw JSON), into the response: as an admin sees it, and as a user, whose page leaves out the
// internal spec fields.
func BenchmarkEncodeListPage(b *testing.B) {
	doc, err := schema.Load(openapi.Document())
	if err != nil {
		b.Fatal(err)
	}
	set, err := kinds.Build(doc, api.Kinds(), nil)
	if err != nil {
		b.Fatal(err)
	}
	d := set.All[0]
	if d.Kind != "Cluster" {
		for _, k := range set.All {
			if k.Kind == "Cluster" {
				d = k
			}
		}
	}
	spec := json.RawMessage(`{"hosted_cluster":{"controller_availability_policy":"HighlyAvailable","etcd":{"management_type":"Managed","storage_size":"8Gi"},"fips":false,"infrastructure_availability_policy":"SingleReplica","networking":{"cluster_network":[{"cidr":"10.132.0.0/14"}],"network_type":"OVNKubernetes","service_network":[{"cidr":"172.31.0.0/16"}]},"platform":{"type":"None"},"services":[{"service":"APIServer","type":"LoadBalancer"},{"service":"OAuthServer","type":"Route"},{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]},"version_stream":"stable-4-16"}`)
	now := time.Now().UTC()
	items := make([]resource.Resource, 100)
	for i := range items {
		conds := make([]conditions.Condition, 5)
		for j := range conds {
			conds[j] = conditions.Condition{Type: fmt.Sprintf("Cond%d", j), Status: conditions.True, Reason: "AllAdaptersReady",
				Message: "every required adapter reports Available at generation 1", ObservedGeneration: 1, LastTransitionTime: now, LastUpdatedTime: now}
		}
		raw, err := json.Marshal(conds)
		if err != nil {
			b.Fatal(err)
		}
		items[i] = resource.Resource{ID: "0193a4c4-0000-7000-8000-000000000000", Kind: "Cluster", Name: fmt.Sprintf("c-%d", i),
			RawLabels: json.RawMessage(`{"env": "prod", "shard": "7"}`), Spec: spec, Generation: 1,
			Status: resource.Status{Phase: conditions.PhaseReady, RawConditions: raw}, CreatedTime: now, UpdatedTime: now}
	}
	k := &kindHandler{d: d}
	// An admin's page is written item by item as the list writes it (appendResource).
	b.Run("admin", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			out := io.Discard
			for i := range items {
				var err error
				if buf, err = k.appendResource(buf[:0], &items[i]); err != nil {
					b.Fatal(err)
				}
				if _, err := out.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	// A user's page leaves out internal fields, through present and encoding/json; so did an admin's before.
	for _, caller := range []struct {
		name   string
		public bool
	}{{"admin-via-present", false}, {"user", true}} {
		b.Run(caller.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out := listJSON{Kind: "ClusterList", Page: 1, Size: 100, Total: 10000, Items: make([]any, len(items))}
				for i := range items {
					item, err := k.present(&items[i], caller.public)
					if err != nil {
						b.Fatal(err)
					}
					out.Items[i] = item
				}
				if err := json.NewEncoder(io.Discard).Encode(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
