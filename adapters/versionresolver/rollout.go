package versionresolver

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// Member is what a rollout pass knows of one cluster of the stream: its spec and labels, and what the HostedCluster
// applier last reported on it.
type Member struct {
	ID, Name      string
	Labels        map[string]string
	AcceptedRisks []string
	// Paused is the cluster's spec.paused: no adapter touches it, so it holds no stage.
	Paused bool
	// Version is the release the cluster completed (the applier's current_version); empty before its first.
	Version string
	// AppliedImage is the release image the applier last applied.
	AppliedImage string
	// Upgrading says the newest version history entry is still Partial; UpgradeVersion is that entry's version.
	Upgrading      bool
	UpgradeVersion string
	// WaitingWindow says the applier holds an admitted upgrade for the cluster's UpgradeSchedule.
	WaitingWindow bool
	// Healthy says the cluster is Available (every adapter) and its applier does not report it Degraded.
	Healthy  bool
	Degraded bool
}

// pass is one rollout decision over a stream's whole fleet.
type pass struct {
	Now        time.Time
	Generation int64 // the stream's
	Policy     rollout.Policy
	Graph      *rollout.Graph
	Prev       *rollout.Status // the last report's, nil for the first pass
	Members    []Member
}

// stageWork is a stage's clusters during a pass.
type stageWork struct {
	status     rollout.StageStatus
	candidates []candidate // may move, not admitted yet
	admitted   int         // admitted and not finished (in progress or waiting for a window)
	holds      int         // not finished: in progress, waiting, pending, unhealthy
}

type candidate struct {
	id, to string
}

// decide is the rollout's decision: which clusters move now, where, and how far every stage is. It is pure. A stage
// admits clusters only when every earlier stage's clusters run the release healthy and have soaked; at most
// max_at_once of a stage move at once; a cluster that does not finish within the progress deadline, or runs the
// release Degraded, fails; a stage with more failures than its budget pauses the rollout until a later spec change.
// Blocked clusters (no path, a risk not accepted, a release pulled) and paused ones hold no stage.
func decide(p pass) rollout.Status {
	prev := p.Prev
	if prev == nil {
		prev = &rollout.Status{}
	}
	target := p.Graph.Target
	st := rollout.Status{Release: target, Baseline: prev.Baseline, Revision: prev.Revision, PausedGeneration: prev.PausedGeneration,
		BudgetGeneration: prev.BudgetGeneration, Admitted: map[string]rollout.Admission{}}
	if prev.Release != target && prev.State == rollout.StateComplete {
		st.Baseline = prev.Release
	}
	// A spec change after the rollout paused itself (`hyperfleet rollout resume`) resumes it, and acknowledges the
	// failures so far: only later ones count against the budget.
	if st.PausedGeneration > 0 && p.Generation > st.PausedGeneration {
		st.PausedGeneration, st.BudgetGeneration = 0, p.Generation
	}
	for i := range prev.Failed {
		if prev.Failed[i].Version == target {
			st.Failed = append(st.Failed, prev.Failed[i])
		}
	}
	failed := map[string]bool{}
	for i := range st.Failed {
		failed[st.Failed[i].ID] = true
	}
	paused := p.Policy.Paused || st.PausedGeneration > 0
	deadline := p.Policy.ProgressDeadline
	stages := make([]stageWork, len(p.Policy.Stages))
	for i, s := range p.Policy.Stages {
		stages[i].status = rollout.StageStatus{Name: s.Name}
	}
	members := slices.Clone(p.Members)
	slices.SortFunc(members, func(a, b Member) int { return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID)) })
	for i := range members {
		m := &members[i]
		si := p.Policy.StageOf(m.Labels)
		w := &stages[si]
		w.status.Clusters++
		if a, ok := prev.Admitted[m.ID]; ok && !m.Paused {
			keep, fail := followAdmission(&a, m, p.Graph, p.Policy.Accepted(m.AcceptedRisks), paused, deadline, p.Now)
			switch {
			case fail != "":
				st.Failed = append(st.Failed, rollout.Failure{ID: m.ID, Name: m.Name, Stage: w.status.Name, Version: target, Reason: fail,
					Message: failureMessage(fail, a, deadline), Time: p.Now, Generation: p.Generation})
				failed[m.ID] = true
				w.status.Failed++
				continue
			case keep:
				st.Admitted[m.ID] = a
				w.admitted++
				w.holds++
				if m.WaitingWindow && a.Started.IsZero() {
					w.status.WaitingWindow++
				} else {
					w.status.InProgress++
				}
				continue
			}
		}
		switch {
		case m.Paused:
			w.status.Blocked++
		case failed[m.ID]:
			w.status.Failed++
		case m.Version == "":
			// Still installing (at the stream's install release): it joins the rollout once it runs something.
			w.status.Pending++
		case m.Version == target && m.Degraded:
			st.Failed = append(st.Failed, rollout.Failure{ID: m.ID, Name: m.Name, Stage: w.status.Name, Version: target,
				Reason: rollout.FailedDegraded, Message: "the cluster runs " + target + " and its HostedCluster is Degraded",
				Time: p.Now, Generation: p.Generation})
			failed[m.ID] = true
			w.status.Failed++
		case m.Version == target && m.Healthy && !m.Upgrading:
			w.status.Upgraded++
		case m.Version == target:
			w.status.InProgress++ // running it, not healthy yet: it holds the stage
			w.holds++
		default:
			hop := p.Graph.NextHop(m.Version, p.Policy.Accepted(m.AcceptedRisks))
			if hop.Blocked != "" {
				w.status.Blocked++
				continue
			}
			w.status.Pending++
			w.holds++
			w.candidates = append(w.candidates, candidate{id: m.ID, to: hop.To})
		}
	}
	overBudget := ""
	for i := range stages {
		n := 0
		for j := range st.Failed {
			if f := &st.Failed[j]; f.Stage == stages[i].status.Name && f.Generation >= st.BudgetGeneration {
				n++
			}
		}
		if n > p.Policy.Stages[i].MaxFailures && overBudget == "" {
			overBudget = stages[i].status.Name
		}
	}
	if overBudget != "" && st.PausedGeneration == 0 {
		st.PausedGeneration = max(p.Generation, 1)
		paused = true
		for id, a := range st.Admitted {
			if a.Started.IsZero() { // told to move, not moving yet: it stays where it is
				delete(st.Admitted, id)
			}
		}
	}
	active := -1
	for i := range stages {
		w, spec := &stages[i], p.Policy.Stages[i]
		var prevStage *rollout.StageStatus
		if prev.Release == target && i < len(prev.Stages) && prev.Stages[i].Name == w.status.Name {
			prevStage = &prev.Stages[i]
		}
		switch {
		case active >= 0:
			w.status.State = rollout.StageWaiting
		case w.holds == 0:
			done := p.Now
			if prevStage != nil && prevStage.CompleteTime != nil {
				done = *prevStage.CompleteTime
			}
			soak := spec.Soak
			if w.status.Upgraded == 0 {
				soak = 0 // nothing in the stage ran the release: there is nothing to watch for the soak
			}
			until := done.Add(soak)
			w.status.CompleteTime, w.status.SoakUntil = &done, &until
			w.status.State = rollout.StageComplete
			if p.Now.Before(until) {
				w.status.State, active = rollout.StageSoaking, i
			}
		default:
			active = i
			w.status.State = rollout.StageActive
			if paused {
				w.status.State = rollout.StagePaused
				continue
			}
			slots := min(spec.MaxAtOnce.Of(w.status.Clusters)-w.admitted, rollout.MaxAdmitted-len(st.Admitted))
			for _, c := range w.candidates {
				if slots <= 0 {
					break
				}
				st.Admitted[c.id] = rollout.Admission{Version: c.to, Admitted: p.Now}
				slots--
				w.status.Pending--
				w.status.InProgress++
			}
		}
	}
	for i := range stages {
		st.Stages = append(st.Stages, stages[i].status)
	}
	if len(st.Failed) > rollout.MaxFailuresListed {
		st.Failed = st.Failed[len(st.Failed)-rollout.MaxFailuresListed:]
	}
	st.State, st.Message = summarize(&st, p.Policy.Paused, overBudget, active)
	if st.State == rollout.StateComplete {
		st.Baseline = target
	}
	if len(st.Admitted) == 0 {
		st.Admitted = nil
	}
	if signature(prev) != signature(&st) {
		st.Revision++
	}
	return st
}

// followAdmission follows an admitted cluster: whether it stays admitted (keep), or failed. A cluster that reached
// its hop leaves the admitted set (neither): it is then judged like any other.
func followAdmission(a *rollout.Admission, m *Member, g *rollout.Graph, accepted map[string]bool, paused bool, deadline time.Duration, now time.Time) (keep bool, fail string) {
	if m.Version == a.Version && !m.Upgrading {
		return false, ""
	}
	if a.Started.IsZero() && (m.AppliedImage == g.Releases[a.Version] || m.Upgrading) && m.AppliedImage != "" {
		a.Started = now
	}
	if a.Started.IsZero() {
		// Not moving yet: a pause or a newer release (another hop) takes the admission back.
		if paused || (m.Version != "" && g.NextHop(m.Version, accepted).To != a.Version) {
			return false, ""
		}
		return true, ""
	}
	if m.Degraded && m.UpgradeVersion == a.Version {
		return false, rollout.FailedDegraded
	}
	if now.Sub(a.Started) > deadline {
		return false, rollout.FailedProgressDeadline
	}
	return true, ""
}

func failureMessage(reason string, a rollout.Admission, deadline time.Duration) string {
	if reason == rollout.FailedDegraded {
		return "the cluster's HostedCluster turned Degraded while it moved to " + a.Version
	}
	if reason == rollout.FailedProgressDeadline {
		return fmt.Sprintf("started moving to %s at %s and has not finished within the progress deadline (%s)",
			a.Version, a.Started.UTC().Format(time.RFC3339), deadline)
	}
	return reason
}

// summarize says the rollout's state and why.
func summarize(st *rollout.Status, pausedBySpec bool, overBudget string, active int) (string, string) {
	switch {
	case st.PausedGeneration > 0:
		names := make([]string, 0, len(st.Failed))
		for i := range st.Failed {
			if f := &st.Failed[i]; f.Generation >= st.BudgetGeneration {
				names = append(names, f.Name)
			}
		}
		stage := overBudget
		if stage == "" && active >= 0 {
			stage = st.Stages[active].Name
		}
		return rollout.StatePausedByFailures, fmt.Sprintf("stage %s exceeded its failure budget (failed: %s); no further cluster gets %s until the rollout is resumed",
			stage, strings.Join(names, ", "), st.Release)
	case pausedBySpec && active >= 0:
		return rollout.StatePaused, "spec.rollout.paused is true: clusters already moving finish, no other starts"
	case active < 0:
		return rollout.StateComplete, fmt.Sprintf("every cluster that can runs %s", st.Release)
	}
	s := st.Stages[active]
	if s.State == rollout.StageSoaking {
		return rollout.StateProgressing, fmt.Sprintf("stage %s soaks until %s", s.Name, s.SoakUntil.UTC().Format(time.RFC3339))
	}
	return rollout.StateProgressing, fmt.Sprintf("stage %s: %d of %d upgraded, %d in progress", s.Name, s.Upgraded, s.Clusters, s.InProgress)
}

// signature is what the clusters of a stream read of its rollout: the state, each stage's state and the admitted
// clusters. Revision moves when it does, and the resolver's Available message names the revision, so that the
// applier's dependents watch notices.
func signature(s *rollout.Status) string {
	var b strings.Builder
	b.WriteString(s.Release + "|" + s.State)
	for _, st := range s.Stages {
		b.WriteString("|" + st.Name + "=" + st.State)
	}
	for _, id := range slices.Sorted(maps.Keys(s.Admitted)) {
		b.WriteString("|" + id + ">" + s.Admitted[id].Version)
	}
	for i := range s.Failed {
		b.WriteString("|x" + s.Failed[i].ID + ">" + s.Failed[i].Version)
	}
	return b.String()
}
