package rollout

import (
	"fmt"
	"reflect"
	"slices"
)

// Why a cluster that could move waits (the reasons of the applier's UpgradePending condition, beside its own
// OutsideUpgradeWindow).
const (
	HeldWaitingForStage = "WaitingForStage" // an earlier stage has not finished or soaked
	HeldWaitingForTurn  = "WaitingForTurn"  // its stage is active, and max_at_once clusters are moving
	HeldRolloutPaused   = "RolloutPaused"   // spec.rollout.paused, or the rollout paused itself
	HeldFailed          = "UpgradeFailed"   // the cluster failed this release; it is not tried again
)

// Cluster is what ForCluster needs of a cluster.
type Cluster struct {
	ID            string
	Labels        map[string]string
	AcceptedRisks []string
	// Installed says a HostedCluster exists; Running is the version it completed (empty while it installs).
	Installed bool
	Running   string
}

// Verdict is what a cluster does about its stream's rollout.
type Verdict struct {
	// Version and Image are what to run. Empty: keep what runs.
	Version, Image string
	// Blocked and Held say why a cluster that does not run the target stays where it is (at most one is set);
	// Message explains it.
	Blocked, Held, Message string
	// Risks are the unaccepted risks of the next conditional hop, if any.
	Risks []string
}

// ForCluster says what the cluster does: install the stream's install release when it has no HostedCluster, move
// where the rollout admitted it, or stay, and then why. The decisions are the version resolver's (the report's
// admitted clusters); this only reads them and explains, so the applier and the CLI say the same.
func ForCluster(r *Report, p *Policy, c Cluster) Verdict {
	if !c.Installed {
		v, image := r.Install()
		return Verdict{Version: v, Image: image}
	}
	if r.Graph == nil || r.Rollout == nil {
		// A resolver from before staged rollouts: the stream's release, as it was then.
		return Verdict{Version: r.ResolvedVersion, Image: r.ReleaseImage}
	}
	g, st := r.Graph, r.Rollout
	if a, ok := st.Admitted[c.ID]; ok && g.Releases[a.Version] != "" {
		return Verdict{Version: a.Version, Image: g.Releases[a.Version]}
	}
	if c.Running == "" || c.Running == g.Target {
		return Verdict{}
	}
	hop := g.NextHop(c.Running, p.Accepted(c.AcceptedRisks))
	if hop.Blocked != "" {
		return Verdict{Blocked: hop.Blocked, Message: g.Explain(c.Running, hop), Risks: hop.Risks}
	}
	v := Verdict{Risks: hop.Risks}
	stage := p.Stages[p.StageOf(c.Labels)].Name
	switch active := st.activeStage(); {
	case st.failed(c.ID):
		v.Held, v.Message = HeldFailed, fmt.Sprintf("the cluster failed %s; it is not tried again on this release", st.Release)
	case st.State == StatePaused:
		v.Held, v.Message = HeldRolloutPaused, fmt.Sprintf("the rollout of %s is paused (spec.rollout.paused)", st.Release)
	case st.State == StatePausedByFailures:
		v.Held, v.Message = HeldRolloutPaused, fmt.Sprintf("the rollout of %s paused itself: %s", st.Release, st.Message)
	case active >= 0 && stageIndex(st, stage) > active:
		v.Held, v.Message = HeldWaitingForStage, fmt.Sprintf("stage %s waits for stage %s (%s) before it moves to %s",
			stage, st.Stages[active].Name, describeStage(&st.Stages[active]), hop.To)
	default:
		v.Held, v.Message = HeldWaitingForTurn, fmt.Sprintf("stage %s moves its clusters to %s a few at a time; this one waits for its turn", stage, hop.To)
	}
	if len(hop.Risks) > 0 {
		v.Message += fmt.Sprintf("; a newer release waits for accepted risks: %s", g.DescribeRisks(hop.Risks))
	}
	return v
}

func describeStage(s *StageStatus) string {
	if s.State == StageSoaking && s.SoakUntil != nil {
		return "soaking until " + s.SoakUntil.UTC().Format("2006-01-02T15:04:05Z")
	}
	return fmt.Sprintf("%d of %d upgraded", s.Upgraded, s.Clusters)
}

// activeStage is the index of the first stage not complete; -1 when all are.
func (s *Status) activeStage() int {
	for i := range s.Stages {
		if s.Stages[i].State != StageComplete {
			return i
		}
	}
	return -1
}

func stageIndex(s *Status, name string) int {
	for i := range s.Stages {
		if s.Stages[i].Name == name {
			return i
		}
	}
	return len(s.Stages) // a stage the report does not know yet (a policy just changed) comes after the others
}

func (s *Status) failed(id string) bool {
	return slices.ContainsFunc(s.Failed, func(f Failure) bool { return f.ID == id && f.Version == s.Release })
}

// Affected says which clusters a change of the stream's report concerns: all of them (all true) when what every
// cluster acts on changed (the target, the graph, whether the rollout is paused), otherwise only those newly
// admitted (or re-aimed) and those newly failed. A stream's report changes at every pass while a rollout moves, and
// waking the whole fleet each time would cost a reconcile per cluster per pass. A cluster whose admission ends is
// not woken: it finished its move, or it had not started and will not on its own. A stage's progress wakes nobody
// either: a held cluster's explanation (which stage it waits for) is refreshed at its next reconcile, at the latest
// when its own turn comes. Nor does the install release: only a cluster without a HostedCluster reads it, and such
// a cluster is being reconciled anyway.
func Affected(old, cur *Report) (ids []string, all bool) {
	if old == nil || cur == nil || old.ReleaseImage != cur.ReleaseImage || old.ResolvedVersion != cur.ResolvedVersion ||
		!reflect.DeepEqual(old.Graph, cur.Graph) || (old.Rollout == nil) != (cur.Rollout == nil) {
		return nil, true
	}
	if old.Rollout == nil {
		return nil, false
	}
	o, c := old.Rollout, cur.Rollout
	if o.Release != c.Release || o.paused() != c.paused() {
		return nil, true
	}
	for id, a := range c.Admitted {
		if b, ok := o.Admitted[id]; !ok || b.Version != a.Version {
			ids = append(ids, id)
		}
	}
	known := map[string]bool{}
	for i := range o.Failed {
		known[o.Failed[i].ID+"/"+o.Failed[i].Version] = true
	}
	for i := range c.Failed {
		if f := &c.Failed[i]; !known[f.ID+"/"+f.Version] && !slices.Contains(ids, f.ID) {
			ids = append(ids, f.ID)
		}
	}
	slices.Sort(ids)
	return ids, false
}

func (s *Status) paused() bool { return s.State == StatePaused || s.State == StatePausedByFailures }

// AffectedData is Affected on two versions of a stream report's data, as an adapter's Dependents hands them over.
// Data that does not decode concerns every cluster, since what changed cannot be told.
func AffectedData(old, cur map[string]any) (ids []string, all bool) {
	o, err := ReportOf(old)
	if err != nil {
		return nil, true
	}
	c, err := ReportOf(cur)
	if err != nil {
		return nil, true
	}
	return Affected(o, c)
}
