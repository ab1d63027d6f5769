package kinds_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// versionStreamSpec is the VersionStream kind's schema with its rules, as the server checks a spec.
func versionStreamSpec(tb testing.TB) resource.SpecSchema {
	tb.Helper()
	doc, err := schema.Load(openapi.Document())
	require.NoError(tb, err)
	set, err := kinds.Build(doc, api.Kinds(), nil)
	require.NoError(tb, err)
	return set.VersionStream.Spec
}

// The schema and the rules together: what each refuses is refused through the one Validate the server calls.
func TestVersionStreamRollout(t *testing.T) {
	spec := versionStreamSpec(t)
	tests := []struct {
		name    string
		rollout string
		want    []string // fields refused; none: accepted
	}{
		{name: "no rollout", rollout: ``},
		{name: "one stage without selector", rollout: `{"stages":[{"name":"all"}]}`},
		{name: "three stages", rollout: `{"paused":false,"resumed_at":"2026-12-01T09:30:00Z","progress_deadline":"1h30m","stages":[
			{"name":"canary","selector":"tier=canary","max_at_once":1,"soak":"30m","max_failures":0},
			{"name":"early","selector":"env in (dev,test),!legacy","max_at_once":"10%","soak":"1.5h"},
			{"name":"rest","max_at_once":"100%"}]}`},
		{name: "duplicate names", rollout: `{"stages":[{"name":"a","selector":"x=1"},{"name":"a"}]}`, want: []string{"rollout.stages[1].name"}},
		{name: "selector missing before the last", rollout: `{"stages":[{"name":"a"},{"name":"b"}]}`, want: []string{"rollout.stages[0].selector"}},
		{name: "empty selector before the last", rollout: `{"stages":[{"name":"a","selector":""},{"name":"b"}]}`, want: []string{"rollout.stages[0].selector"}},
		{name: "bad selector", rollout: `{"stages":[{"name":"a","selector":"env in (dev"}]}`, want: []string{"rollout.stages[0].selector"}},
		{name: "zero deadline", rollout: `{"progress_deadline":"0s","stages":[{"name":"a"}]}`, want: []string{"rollout.progress_deadline"}},
		{name: "zero soak", rollout: `{"stages":[{"name":"a","soak":"0s"}]}`},
		{name: "no stages", rollout: `{"stages":[]}`, want: []string{"rollout.stages"}},
		{name: "percent over 100", rollout: `{"stages":[{"name":"a","max_at_once":"101%"}]}`, want: []string{"rollout.stages[0].max_at_once"}},
		{name: "zero at once", rollout: `{"stages":[{"name":"a","max_at_once":0}]}`, want: []string{"rollout.stages[0].max_at_once"}},
		{name: "not a duration", rollout: `{"stages":[{"name":"a","soak":"30 minutes"}]}`, want: []string{"rollout.stages[0].soak"}},
		{name: "unknown member", rollout: `{"stages":[{"name":"a"}],"speed":"fast"}`, want: []string{"rollout.speed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"target_version":"4.16","accepted_risks":["AROBrokenDNS"]`
			if tt.rollout != "" {
				doc += `,"rollout":` + tt.rollout
			}
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(doc+`}`), &v))
			var got []string
			for _, p := range spec.Validate(v) {
				got = append(got, p.Field)
			}
			if len(tt.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.NotEmpty(t, got)
			for _, f := range got {
				require.Contains(t, tt.want, f, "refused fields: %v", got)
			}
		})
	}
}

// Defaults land inside the stages the user wrote (what the resolver then reads), and none is added to a stream
// that has no rollout.
func TestVersionStreamRolloutDefaults(t *testing.T) {
	spec := versionStreamSpec(t)
	v := map[string]any{"target_version": "4.16"}
	require.NoError(t, spec.ApplyDefaults(v))
	require.NotContains(t, v, "rollout")
	require.NotContains(t, v, "accepted_risks")

	v = map[string]any{"target_version": "4.16", "rollout": map[string]any{"stages": []any{map[string]any{"name": "all"}}}}
	require.NoError(t, spec.ApplyDefaults(v))
	rollout := v["rollout"].(map[string]any)
	require.Equal(t, "1h", rollout["progress_deadline"])
	require.NotContains(t, rollout, "paused")
	stage := rollout["stages"].([]any)[0].(map[string]any)
	require.Equal(t, "100%", stage["max_at_once"])
	require.Equal(t, "0s", stage["soak"])
	require.EqualValues(t, 0, stage["max_failures"])
	require.Empty(t, spec.Validate(v))
}

func TestAcceptedRisks(t *testing.T) {
	spec := versionStreamSpec(t)
	for _, tt := range []struct {
		risks string
		ok    bool
	}{
		{`[]`, true}, {`["AROBrokenDNS","PreRelease"]`, true}, {`["aroBroken"]`, false}, {`["A","A"]`, false}, {`[""]`, false},
	} {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(`{"target_version":"4.16","accepted_risks":`+tt.risks+`}`), &v))
		require.Equal(t, tt.ok, len(spec.Validate(v)) == 0, tt.risks)
	}
}
