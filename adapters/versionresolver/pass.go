package versionresolver

import (
	"context"
	"fmt"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// Fleet lists the clusters of a stream, as a rollout pass sees them.
type Fleet interface {
	Members(ctx context.Context, stream string) ([]Member, error)
}

// ConditionRolloutProgressing says whether the stream's rollout moves: True while it does, False when complete or
// paused (reason Paused or FailureBudgetExceeded).
const ConditionRolloutProgressing = "RolloutProgressing"

// Reasons of ConditionRolloutProgressing.
const (
	ReasonRolling               = "Rolling"
	ReasonSoaking               = "Soaking"
	ReasonRolloutComplete       = "RolloutComplete"
	ReasonRolloutPaused         = "Paused"
	ReasonFailureBudgetExceeded = "FailureBudgetExceeded"
	ReasonFleetUnavailable      = "FleetUnavailable"
)

// DefaultRolloutInterval is how soon a stream whose rollout moves is looked at again.
const DefaultRolloutInterval = 10 * time.Second

// rolloutPass adds to a resolved stream's outcome the rollout: the graph slice, the decision over its clusters and
// the release new clusters install. It returns when to look again (0: the resolver's own re-check), and an error
// when the fleet could not be read (the last rollout is kept in the report then, so nothing moves and nothing is
// forgotten).
func (r *Reconciler) rolloutPass(ctx context.Context, obj *adapter.Object, s Stream, graph *cincinnati.Graph, out *adapter.Outcome) (time.Duration, error) {
	target := cincinnati.Release{Image: stringOf(out.Data[DataReleaseImage]), Version: stringOf(out.Data[DataResolvedVersion])}
	if target.Image == "" {
		return 0, nil
	}
	prev := &rollout.Report{}
	if obj.LastReport != nil {
		if last, err := rollout.ReportOf(obj.LastReport.Data); err == nil {
			prev = last
		} // an unreadable last rollout starts afresh
	}
	policy, err := rollout.PolicyOf(obj.Spec)
	if err != nil {
		return 0, adapter.Terminal(ReasonInvalidSpec, err)
	}
	members, err := r.Fleet.Members(ctx, obj.Name)
	if err != nil {
		keepRollout(out, prev)
		out.Conditions = append(out.Conditions, conditions.Reported{Type: ConditionRolloutProgressing, Status: conditions.Unknown,
			Reason: ReasonFleetUnavailable, Message: err.Error()})
		return 0, adapter.Transient(ReasonFleetUnavailable, err)
	}
	slice := prev.Graph
	if graph != nil {
		// A target pulled since it was resolved is not rolled out: the newest release the graph still lists is.
		if _, ok := cincinnati.Find(graph, target.Version); !ok {
			if latest, err := cincinnati.Latest(graph, s.Target, s.AllowPrerelease); err == nil {
				target = cincinnati.Release{Image: latest.Image, Version: latest.Version}
			}
		}
		fleet := map[string]bool{}
		for i := range members {
			fleet[members[i].Version] = true
		}
		slice = graphSlice(graph, target, s.AllowPrerelease, fleet)
	}
	if slice == nil || slice.Target != target.Version {
		// No graph yet for this target (Cincinnati unreachable since the stream was retargeted): nothing moves.
		keepRollout(out, prev)
		return 0, nil
	}
	var last *rollout.Status
	if prev.Graph != nil {
		last = prev.Rollout
	}
	status := decide(pass{Now: r.now().UTC().Truncate(time.Second), Generation: obj.Generation, Policy: policy, Graph: slice,
		Prev: last, Members: members})
	report := rollout.Report{ReleaseImage: stringOf(out.Data[DataReleaseImage]), ResolvedVersion: stringOf(out.Data[DataResolvedVersion]),
		Graph: slice, Rollout: &status}
	report.InstallVersion, report.InstallImage = installRelease(status.Baseline, target, slice, graph, prev)
	data, err := report.Data()
	if err != nil {
		return 0, err
	}
	for k, v := range data {
		out.Data[k] = v
	}
	// The revision in Available's message moves the aggregated condition the applier's dependents watch follows.
	out.Available.Message = fmt.Sprintf("%s; rollout of %s %s (revision %d)", out.Available.Message, status.Release, status.State, status.Revision)
	out.Conditions = append(out.Conditions, progressing(&status))
	if status.State == rollout.StateProgressing || len(status.Admitted) > 0 {
		return r.rolloutInterval(), nil
	}
	return 0, nil
}

// keepRollout carries the last report's graph and rollout over, unchanged.
func keepRollout(out *adapter.Outcome, prev *rollout.Report) {
	data, err := prev.Data()
	if err != nil {
		return
	}
	for _, k := range []string{rollout.DataGraph, rollout.DataRollout, rollout.DataInstallImage, rollout.DataInstallVersion} {
		if v, ok := data[k]; ok {
			out.Data[k] = v
		}
	}
}

// installRelease is what new clusters install: the newest release whose rollout completed, else the target.
func installRelease(baseline string, target cincinnati.Release, slice *rollout.Graph, graph *cincinnati.Graph, prev *rollout.Report) (string, string) {
	if baseline == "" || baseline == target.Version {
		return target.Version, target.Image
	}
	if image := slice.Releases[baseline]; image != "" {
		return baseline, image
	}
	if rel, ok := cincinnati.Find(graph, baseline); ok {
		return baseline, rel.Image
	}
	if prev.InstallVersion == baseline && prev.InstallImage != "" {
		return baseline, prev.InstallImage
	}
	return target.Version, target.Image
}

func progressing(s *rollout.Status) conditions.Reported {
	c := conditions.Reported{Type: ConditionRolloutProgressing, Status: conditions.False, Message: s.Message}
	switch s.State {
	case rollout.StateProgressing:
		c.Status, c.Reason = conditions.True, ReasonRolling
		for _, st := range s.Stages {
			if st.State == rollout.StageSoaking {
				c.Reason = ReasonSoaking
			}
		}
	case rollout.StatePaused:
		c.Reason = ReasonRolloutPaused
	case rollout.StatePausedByFailures:
		c.Reason = ReasonFailureBudgetExceeded
	default:
		c.Reason = ReasonRolloutComplete
	}
	return c
}

func (r *Reconciler) rolloutInterval() time.Duration {
	if r.RolloutInterval > 0 {
		return r.RolloutInterval
	}
	return DefaultRolloutInterval
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
