package rollout

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPolicyOf(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		wantErr string
		check   func(t *testing.T, p Policy)
	}{
		{name: "no rollout: one stage, all at once", spec: `{"target_version":"4.16"}`, check: func(t *testing.T, p Policy) {
			require.Len(t, p.Stages, 1)
			require.Equal(t, 7, p.Stages[0].MaxAtOnce.Of(7))
			require.Equal(t, DefaultProgressDeadline, p.ProgressDeadline)
		}},
		{name: "stages", spec: `{"accepted_risks":["A"],"rollout":{"paused":true,"progress_deadline":"5m","stages":[
			{"name":"canary","selector":"tier in (canary)","max_at_once":2,"soak":"1m","max_failures":1},
			{"name":"rest","max_at_once":"10%"}]}}`, check: func(t *testing.T, p Policy) {
			require.True(t, p.Paused)
			require.Equal(t, 5*time.Minute, p.ProgressDeadline)
			require.Equal(t, 0, p.StageOf(map[string]string{"tier": "canary"}))
			require.Equal(t, 1, p.StageOf(map[string]string{"tier": "prod"}))
			require.Equal(t, 1, p.StageOf(nil))
			require.Equal(t, 2, p.Stages[0].MaxAtOnce.Of(100))
			require.Equal(t, 3, p.Stages[1].MaxAtOnce.Of(21), "percentages round up")
			require.Equal(t, 1, p.Stages[1].MaxAtOnce.Of(1))
			require.True(t, p.Accepted([]string{"B"})["A"])
		}},
		{name: "a bad selector", spec: `{"rollout":{"stages":[{"name":"a","selector":"x in ("},{"name":"b"}]}}`, wantErr: "selector"},
		{name: "an early stage without selector", spec: `{"rollout":{"stages":[{"name":"a"},{"name":"b"}]}}`, wantErr: "only the last stage"},
		{name: "a bad percentage", spec: `{"rollout":{"stages":[{"name":"a","max_at_once":"150%"}]}}`, wantErr: "max_at_once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PolicyOf(json.RawMessage(tt.spec))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, p)
		})
	}
}

func testReport() *Report {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return &Report{ReleaseImage: "img-3", ResolvedVersion: "4.16.3", InstallImage: "img-2", InstallVersion: "4.16.2",
		Graph: &Graph{Target: "4.16.3", Releases: map[string]string{"4.16.2": "img-2", "4.16.3": "img-3"},
			Paths: map[string]Hops{
				"4.16.1": {To: "4.16.2", Conditional: []ConditionalHop{{To: "4.16.3", Risks: []string{"R"}}}},
				"4.16.2": {To: "4.16.3"},
			},
			Risks: map[string]Risk{"R": {URL: "https://r", Message: "bad"}}},
		Rollout: &Status{Release: "4.16.3", State: StateProgressing, Stages: []StageStatus{
			{Name: "canary", State: StageActive, Clusters: 2}, {Name: "rest", State: StageWaiting}},
			Admitted: map[string]Admission{"a": {Version: "4.16.3", Admitted: now}}},
	}
}

func TestForCluster(t *testing.T) {
	policy, err := PolicyOf(json.RawMessage(`{"rollout":{"stages":[{"name":"canary","selector":"c=1"},{"name":"rest"}]}}`))
	require.NoError(t, err)
	tests := []struct {
		name   string
		change func(r *Report)
		c      Cluster
		want   Verdict
	}{
		{name: "a new cluster installs the install release", c: Cluster{ID: "n"}, want: Verdict{Version: "4.16.2", Image: "img-2"}},
		{name: "admitted: moves", c: Cluster{ID: "a", Installed: true, Running: "4.16.2"}, want: Verdict{Version: "4.16.3", Image: "img-3"}},
		{name: "at the target", c: Cluster{ID: "b", Installed: true, Running: "4.16.3"}, want: Verdict{}},
		{name: "a later stage waits", c: Cluster{ID: "b", Installed: true, Running: "4.16.2"}, want: Verdict{Held: HeldWaitingForStage}},
		{name: "its stage is active: waits its turn", c: Cluster{ID: "b", Installed: true, Running: "4.16.2", Labels: map[string]string{"c": "1"}},
			want: Verdict{Held: HeldWaitingForTurn}},
		{name: "paused rollout", change: func(r *Report) { r.Rollout.State = StatePaused },
			c: Cluster{ID: "b", Installed: true, Running: "4.16.2"}, want: Verdict{Held: HeldRolloutPaused}},
		{name: "a pulled release", c: Cluster{ID: "b", Installed: true, Running: "4.16.0"}, want: Verdict{Blocked: BlockedNotInGraph}},
		{name: "no report of rollouts: the stream's release", change: func(r *Report) { r.Rollout = nil },
			c: Cluster{ID: "b", Installed: true, Running: "4.16.1"}, want: Verdict{Version: "4.16.3", Image: "img-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testReport()
			if tt.change != nil {
				tt.change(r)
			}
			got := ForCluster(r, &policy, tt.c)
			require.Equal(t, tt.want.Version, got.Version)
			require.Equal(t, tt.want.Image, got.Image)
			require.Equal(t, tt.want.Held, got.Held)
			require.Equal(t, tt.want.Blocked, got.Blocked)
			if got.Held != "" || got.Blocked != "" {
				require.NotEmpty(t, got.Message)
			}
		})
	}
	v := ForCluster(testReport(), &policy, Cluster{ID: "b", Installed: true, Running: "4.16.1", Labels: map[string]string{"c": "1"}})
	require.Equal(t, HeldWaitingForTurn, v.Held, "4.16.1 moves to 4.16.2 unconditionally")
	require.Equal(t, []string{"R"}, v.Risks)
	require.Contains(t, v.Message, "R (https://r): bad")
}

func TestReportRoundTripAndAffected(t *testing.T) {
	r := testReport()
	data, err := r.Data()
	require.NoError(t, err)
	b, err := json.Marshal(data)
	require.NoError(t, err)
	var decoded map[string]any
	require.NoError(t, json.Unmarshal(b, &decoded))
	back, err := ReportOf(decoded)
	require.NoError(t, err)
	require.Equal(t, r, back)

	ids, all := Affected(r, back)
	require.False(t, all)
	require.Empty(t, ids)

	next := testReport()
	next.Rollout.Admitted = map[string]Admission{"b": {Version: "4.16.3"}}
	next.Rollout.Failed = []Failure{{ID: "c", Version: "4.16.3"}}
	ids, all = Affected(r, next)
	require.False(t, all)
	require.Equal(t, []string{"b", "c"}, ids, "a new admission and a new failure; a finished admission wakes nobody")

	next = testReport()
	next.Rollout.Stages[0].State = StageComplete
	ids, all = Affected(r, next)
	require.False(t, all, "a stage's progress wakes nobody")
	require.Empty(t, ids)
	next.Rollout.State = StatePausedByFailures
	_, all = Affected(r, next)
	require.True(t, all, "every held cluster now says the rollout is paused")
	_, all = Affected(nil, r)
	require.True(t, all)
}
