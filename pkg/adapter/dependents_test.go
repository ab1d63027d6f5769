package adapter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestDependentsCheck(t *testing.T) {
	valid := Dependents{Kind: VersionStreams(), Field: "version_stream", Adapter: "version-resolver", DataKeys: []string{"release_image"}}
	everything := func(_, _ map[string]any) ([]string, bool) { return nil, true }
	tests := []struct {
		name    string
		primary *Kind // the controller's kind; nil is Clusters()
		mutate  func(*Dependents)
		want    string // a substring of the error; empty: valid
	}{
		{name: "valid", mutate: func(*Dependents) {}},
		{name: "no kind", mutate: func(d *Dependents) { d.Kind = nil }, want: "without a kind"},
		{name: "child kind", mutate: func(d *Dependents) { d.Kind = NodePools() }, want: "only root kinds"},
		{name: "nested field", mutate: func(d *Dependents) { d.Field = "hosted_cluster.release" }, want: "top-level spec field"},
		{name: "quote in field", mutate: func(d *Dependents) { d.Field = "x'" }, want: "top-level spec field"},
		{name: "bad adapter", mutate: func(d *Dependents) { d.Adapter = "Version Resolver" }, want: "not an adapter name"},
		{name: "adapter without data keys", mutate: func(d *Dependents) { d.DataKeys = nil }, want: "no data keys"},
		{name: "following the spec", mutate: func(d *Dependents) { d.Adapter, d.DataKeys = "", nil }},
		{name: "data keys without an adapter", mutate: func(d *Dependents) { d.Adapter = "" }, want: "need the adapter"},
		{name: "narrowed by Affected", mutate: func(d *Dependents) { d.Affected = everything }},
		{name: "Affected without an adapter", mutate: func(d *Dependents) { d.Adapter, d.DataKeys, d.Affected = "", nil, everything },
			want: "needs an adapter"},
		{name: "Affected on a child kind's controller", primary: NodePools(), mutate: func(d *Dependents) { d.Affected = everything },
			want: "only a root kind's controller"},
		{name: "a child kind's controller without Affected", primary: NodePools(), mutate: func(*Dependents) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := valid
			tt.mutate(&d)
			primary := tt.primary
			if primary == nil {
				primary = Clusters()
			}
			err := d.checkFor(primary)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// The aggregate fingerprint moves with what the adapter's report says (the mirrored Available condition) and with
// the generation, and with nothing else: another adapter's condition or a recomputation time does not move it.
func TestAggregateFingerprint(t *testing.T) {
	mirrored := conditions.AdapterAvailable("version-resolver")
	base := listItem{Generation: 2, Conditions: []conditions.Condition{
		{Type: conditions.Ready, Status: conditions.True},
		{Type: mirrored, Status: conditions.True, Reason: "Resolved", Message: "stable-4.16/amd64 resolves to 4.16.2", ObservedGeneration: 2},
		{Type: conditions.AdapterAvailable("other"), Status: conditions.True},
	}}
	with := func(change func(it *listItem)) listItem {
		it := base
		it.Conditions = append([]conditions.Condition(nil), base.Conditions...)
		change(&it)
		return it
	}
	tests := []struct {
		name string
		item listItem
		same bool
	}{
		{name: "unchanged", item: with(func(*listItem) {}), same: true},
		{name: "another adapter's condition", item: with(func(it *listItem) { it.Conditions[2].Status = conditions.False }), same: true},
		{name: "the aggregate Ready", item: with(func(it *listItem) { it.Conditions[0].Reason = "x" }), same: true},
		{name: "the message", item: with(func(it *listItem) { it.Conditions[1].Message = "stable-4.16/amd64 resolves to 4.16.3" })},
		{name: "the status", item: with(func(it *listItem) { it.Conditions[1].Status = conditions.False })},
		{name: "the reason", item: with(func(it *listItem) { it.Conditions[1].Reason = "ImageKnown" })},
		{name: "the observed generation", item: with(func(it *listItem) { it.Conditions[1].ObservedGeneration = 3 })},
		{name: "the generation", item: with(func(it *listItem) { it.Generation = 3 })},
		{name: "no report yet", item: with(func(it *listItem) { it.Conditions = it.Conditions[:1] })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := aggregateFingerprint(&tt.item, "version-resolver") == aggregateFingerprint(&base, "version-resolver")
			require.Equal(t, tt.same, got)
		})
	}
}

func TestFollowedData(t *testing.T) {
	keys := []string{"release_image"}
	a := &Report{Data: map[string]any{"release_image": "quay.io/x:4.16.2", "resolved_time": "t1"}}
	b := &Report{Data: map[string]any{"release_image": "quay.io/x:4.16.2", "resolved_time": "t2"}}
	c := &Report{Data: map[string]any{"release_image": "quay.io/x:4.16.3"}}
	require.Equal(t, followedData(a, keys), followedData(b, keys), "keys that are not followed do not matter")
	require.NotEqual(t, followedData(a, keys), followedData(c, keys))
	require.Nil(t, followedData(nil, keys), "no report, nothing followed")
	require.Equal(t, map[string]any{"release_image": nil}, followedData(&Report{}, keys))
}
