package versionresolver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// twoReleases is 4.16.1 → 4.16.2 (the target), and 4.16.0 → 4.16.2 only through a risk.
func twoReleases() *rollout.Graph {
	return &rollout.Graph{Target: "4.16.2",
		Releases: map[string]string{"4.16.1": "img-1", "4.16.2": "img-2"},
		Paths: map[string]rollout.Hops{
			"4.16.1": {To: "4.16.2"},
			"4.16.0": {Conditional: []rollout.ConditionalHop{{To: "4.16.2", Risks: []string{"BadDNS"}}}},
		},
		Risks: map[string]rollout.Risk{"BadDNS": {URL: "https://issues.example/1", Message: "DNS breaks"}}}
}

func policyOf(t *testing.T, spec string) rollout.Policy {
	t.Helper()
	p, err := rollout.PolicyOf(json.RawMessage(spec))
	require.NoError(t, err)
	return p
}

const threeStages = `{"target_version":"4.16","rollout":{"progress_deadline":"30m","stages":[
	{"name":"canary","selector":"stage=canary","max_at_once":1,"soak":"10m"},
	{"name":"early","selector":"stage=early","max_at_once":"50%","max_failures":1},
	{"name":"rest"}]}}`

// fleet makes n clusters per stage label, all at version, healthy.
func fleet(version string, perStage map[string]int) []Member {
	var out []Member
	for _, stage := range []string{"canary", "early", "rest"} {
		for i := range perStage[stage] {
			id := fmt.Sprintf("%s-%02d", stage, i)
			out = append(out, Member{ID: id, Name: id, Labels: map[string]string{"stage": stage}, Version: version,
				AppliedImage: "img-1", Healthy: true})
		}
	}
	return out
}

func set(members []Member, id string, change func(*Member)) {
	for i := range members {
		if members[i].ID == id {
			change(&members[i])
		}
	}
}

// finish makes every admitted cluster run its admitted version, healthy.
func finish(members []Member, st rollout.Status) {
	for id, a := range st.Admitted {
		set(members, id, func(m *Member) { m.Version, m.AppliedImage, m.Upgrading, m.Healthy = a.Version, "img-2", false, true })
	}
}

func TestDecideStagesInOrder(t *testing.T) {
	policy := policyOf(t, threeStages)
	members := fleet("4.16.1", map[string]int{"canary": 2, "early": 4, "rest": 3})
	p := pass{Now: t0, Generation: 1, Policy: policy, Graph: twoReleases(), Members: members}

	st := decide(p)
	require.Equal(t, rollout.StateProgressing, st.State)
	require.Equal(t, map[string]rollout.Admission{"canary-00": {Version: "4.16.2", Admitted: t0}}, st.Admitted, "one canary at once")
	require.Equal(t, []string{rollout.StageActive, rollout.StageWaiting, rollout.StageWaiting}, states(st))

	// The applier applies: the start is recorded, the slot stays taken.
	set(members, "canary-00", func(m *Member) { m.AppliedImage, m.Upgrading = "img-2", true })
	p.Prev, p.Now = &st, t0.Add(time.Minute)
	st = decide(p)
	require.Equal(t, t0.Add(time.Minute), st.Admitted["canary-00"].Started)
	require.Len(t, st.Admitted, 1)

	// It finishes: the next canary goes.
	finish(members, st)
	p.Prev, p.Now = &st, t0.Add(2*time.Minute)
	st = decide(p)
	require.Equal(t, []string{"canary-01"}, keys(st.Admitted))
	require.Equal(t, 1, st.Stages[0].Upgraded)

	// The canary is done: it soaks 10 minutes, early waits.
	finish(members, st)
	p.Prev, p.Now = &st, t0.Add(3*time.Minute)
	st = decide(p)
	require.Empty(t, st.Admitted)
	require.Equal(t, rollout.StageSoaking, st.Stages[0].State)
	require.Equal(t, t0.Add(13*time.Minute), *st.Stages[0].SoakUntil)
	p.Prev, p.Now = &st, t0.Add(12*time.Minute)
	st = decide(p)
	require.Empty(t, st.Admitted, "still soaking")

	// Soaked: early moves half its clusters at once.
	p.Prev, p.Now = &st, t0.Add(14*time.Minute)
	st = decide(p)
	require.Equal(t, []string{"early-00", "early-01"}, keys(st.Admitted))
	require.Equal(t, []string{rollout.StageComplete, rollout.StageActive, rollout.StageWaiting}, states(st))

	for range 2 {
		finish(members, st)
		p.Prev, p.Now = &st, p.Now.Add(time.Minute)
		st = decide(p)
	}
	require.Equal(t, rollout.StageComplete, st.Stages[1].State, "early has no soak")
	require.Len(t, st.Admitted, 3, "rest takes all its clusters at once (100%%)")
	finish(members, st)
	p.Prev, p.Now = &st, p.Now.Add(time.Minute)
	st = decide(p)
	require.Equal(t, rollout.StateComplete, st.State)
	require.Equal(t, "4.16.2", st.Baseline, "new clusters install the release once it rolled out")
}

func TestDecideFailures(t *testing.T) {
	policy := policyOf(t, threeStages)
	t.Run("a canary past its deadline pauses the rollout", func(t *testing.T) {
		members := fleet("4.16.1", map[string]int{"canary": 2, "early": 2})
		p := pass{Now: t0, Generation: 3, Policy: policy, Graph: twoReleases(), Members: members}
		st := decide(p)
		set(members, "canary-00", func(m *Member) { m.AppliedImage, m.Upgrading = "img-2", true })
		p.Prev, p.Now = &st, t0.Add(time.Minute)
		st = decide(p)
		p.Prev, p.Now = &st, t0.Add(32*time.Minute)
		st = decide(p)
		require.Equal(t, rollout.StatePausedByFailures, st.State)
		require.Equal(t, int64(3), st.PausedGeneration)
		require.Len(t, st.Failed, 1)
		require.Equal(t, rollout.FailedProgressDeadline, st.Failed[0].Reason)
		require.Empty(t, st.Admitted, "nobody else is told to move")
		require.Contains(t, st.Message, "canary-00")

		// Passes while paused change nothing; a spec change after the pause (resume) goes on, the failure acknowledged.
		p.Prev, p.Now = &st, t0.Add(40*time.Minute)
		st = decide(p)
		require.Equal(t, rollout.StatePausedByFailures, st.State)
		require.Empty(t, st.Admitted)
		p.Prev, p.Generation = &st, 4
		st = decide(p)
		require.Equal(t, rollout.StateProgressing, st.State)
		require.Equal(t, []string{"canary-01"}, keys(st.Admitted), "the failed canary is not tried again")
		require.Equal(t, 1, st.Stages[0].Failed)
	})
	t.Run("degraded at the release counts, within the budget", func(t *testing.T) {
		members := fleet("4.16.2", map[string]int{"canary": 1, "early": 4})
		for _, id := range []string{"early-00", "early-01", "early-02", "early-03"} {
			set(members, id, func(m *Member) { m.Version = "4.16.1" })
		}
		set(members, "early-00", func(m *Member) { m.Version, m.Degraded, m.Healthy = "4.16.2", true, false })
		st := decide(pass{Now: t0, Generation: 1, Policy: policy, Graph: twoReleases(), Members: members})
		require.Equal(t, rollout.StateProgressing, st.State, "early tolerates one failure")
		require.Equal(t, 1, st.Stages[1].Failed)
		set(members, "early-01", func(m *Member) { m.Version, m.Degraded, m.Healthy = "4.16.2", true, false })
		st = decide(pass{Now: t0.Add(time.Minute), Generation: 1, Policy: policy, Graph: twoReleases(), Members: members, Prev: &st})
		require.Equal(t, rollout.StatePausedByFailures, st.State)
		require.Equal(t, 2, st.Stages[1].Failed)
	})
}

func TestDecideHolds(t *testing.T) {
	policy := policyOf(t, threeStages)
	members := fleet("4.16.1", map[string]int{"canary": 2, "early": 1})
	set(members, "canary-00", func(m *Member) { m.Version = "4.16.0" }) // only a risky edge
	set(members, "canary-01", func(m *Member) { m.Paused = true })      // paused
	set(members, "early-00", func(m *Member) { m.Version = "4.15.9" })  // not in the graph
	st := decide(pass{Now: t0, Generation: 1, Policy: policy, Graph: twoReleases(), Members: members})
	require.Empty(t, st.Admitted)
	require.Equal(t, 2, st.Stages[0].Blocked)
	require.Equal(t, rollout.StateComplete, st.State, "blocked and paused clusters hold no stage, and a stage nobody upgraded in does not soak")
	require.Equal(t, 1, st.Stages[1].Blocked)

	set(members, "canary-00", func(m *Member) { m.AcceptedRisks = []string{"BadDNS"} })
	st = decide(pass{Now: t0, Generation: 1, Policy: policy, Graph: twoReleases(), Members: members})
	require.Equal(t, []string{"canary-00"}, keys(st.Admitted), "an accepted risk opens the conditional edge")

	paused := policyOf(t, `{"target_version":"4.16","rollout":{"paused":true}}`)
	st = decide(pass{Now: t0, Generation: 1, Policy: paused, Graph: twoReleases(), Members: fleet("4.16.1", map[string]int{"rest": 2})})
	require.Equal(t, rollout.StatePaused, st.State)
	require.Empty(t, st.Admitted)
}

func TestDecideSupersedes(t *testing.T) {
	policy := policyOf(t, `{"target_version":"4.16"}`)
	members := fleet("4.16.1", map[string]int{"rest": 2})
	st := decide(pass{Now: t0, Generation: 1, Policy: policy, Graph: twoReleases(), Members: members})
	require.Len(t, st.Admitted, 2)
	set(members, "rest-00", func(m *Member) { m.AppliedImage, m.Upgrading = "img-2", true }) // started
	newer := twoReleases()
	newer.Target, newer.Releases["4.16.3"] = "4.16.3", "img-3"
	newer.Paths["4.16.1"] = rollout.Hops{To: "4.16.3"}
	newer.Paths["4.16.2"] = rollout.Hops{To: "4.16.3"}
	st = decide(pass{Now: t0.Add(time.Minute), Generation: 1, Policy: policy, Graph: newer, Members: members, Prev: &st})
	require.Equal(t, "4.16.2", st.Admitted["rest-00"].Version, "a started cluster finishes its move")
	require.Equal(t, "4.16.3", st.Admitted["rest-01"].Version, "one not started goes to the newer release")
}

func states(st rollout.Status) []string {
	var out []string
	for _, s := range st.Stages {
		out = append(out, s.State)
	}
	return out
}

func keys(m map[string]rollout.Admission) []string {
	return slices.Sorted(maps.Keys(m))
}

// BenchmarkDecide10000 is one rollout decision over 10,000 clusters in three stages, mid-rollout.
func BenchmarkDecide10000(b *testing.B) {
	policy, err := rollout.PolicyOf(json.RawMessage(threeStages))
	require.NoError(b, err)
	members := fleet("4.16.1", map[string]int{"canary": 10, "early": 990, "rest": 9000})
	for i := range members[:500] {
		members[i].Version = "4.16.2"
	}
	p := pass{Now: t0, Generation: 1, Policy: policy, Graph: twoReleases(), Members: members}
	st := decide(p)
	p.Prev = &st
	b.ResetTimer()
	for range b.N {
		decide(p)
	}
}
