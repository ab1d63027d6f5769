// Package rollout is the shared vocabulary of staged rollouts: the VersionStream's rollout policy, and the report
// the version resolver posts on the stream (the bounded slice of the update graph its clusters need, and the state
// of the rollout with the clusters it admitted). The version resolver alone decides; the HostedCluster applier
// applies what was decided for its cluster and explains a hold with ForCluster; the CLI prints it. Everything here
// is pure: no I/O, no clock.
package rollout

import (
	"encoding/json"
	"fmt"
	"time"
)

// Keys of the version resolver's report data on a VersionStream.
const (
	// DataReleaseImage and DataResolvedVersion are the newest release of the stream's minor: the rollout's target.
	DataReleaseImage    = "release_image"
	DataResolvedVersion = "resolved_version"
	// DataInstallImage and DataInstallVersion are what a new cluster installs: the newest release whose rollout
	// completed (a first installation is not an upgrade, but it must not start on a release still in its canary).
	DataInstallImage   = "install_image"
	DataInstallVersion = "install_version"
	// DataGraph is the bounded slice of the update graph (Graph).
	DataGraph = "graph"
	// DataRollout is the rollout's state (Status).
	DataRollout = "rollout"
)

// DataKeys are the keys of the report an adapter of the stream's clusters follows (adapter.Dependents.DataKeys):
// what ReportOf reads.
func DataKeys() []string {
	return []string{DataReleaseImage, DataResolvedVersion, DataInstallImage, DataInstallVersion, DataGraph, DataRollout}
}

// MaxAdmitted bounds the clusters admitted and not yet finished at once on one stream, whatever the stages allow:
// each is an entry of the stream's report, whose data the API caps at 64 KiB.
const MaxAdmitted = 300

// MaxFailuresListed bounds the failed clusters a report names.
const MaxFailuresListed = 50

// MaxPaths bounds the versions Graph.Paths describes.
const MaxPaths = 200

// Graph is the part of a channel's update graph a stream's clusters need to decide their next hop: for each
// version a cluster may run, the newest release it may move to in one unconditional hop and the newer ones it may
// reach through a conditional edge once their risks are accepted, never newer than the stream's target and never a
// release the graph no longer lists.
type Graph struct {
	// Target is the stream's newest release (DataResolvedVersion).
	Target string `json:"target"`
	// Releases maps every version named as a hop (and the target) to its release image.
	Releases map[string]string `json:"releases"`
	// Paths maps a version to its hops; a version absent from Paths is not in the channel's graph (pulled, or of
	// another channel) unless Truncated says the slice left it out.
	Paths map[string]Hops `json:"paths"`
	// Risks describes every risk a conditional hop names.
	Risks map[string]Risk `json:"risks,omitempty"`
	// Truncated says Paths holds only the MaxPaths versions that matter most (those the fleet runs first).
	Truncated bool `json:"truncated,omitempty"`
}

// Hops are the ways forward from one version.
type Hops struct {
	// To is the newest release reachable by an unconditional edge; empty when there is none.
	To string `json:"to,omitempty"`
	// Conditional are the releases newer than To reachable only through a conditional edge, newest first.
	Conditional []ConditionalHop `json:"conditional,omitempty"`
}

// ConditionalHop is a release reachable through a conditional edge, and the risks that gate it.
type ConditionalHop struct {
	To    string   `json:"to"`
	Risks []string `json:"risks"`
}

// Risk is a known issue that gates a conditional edge, as Cincinnati describes it.
type Risk struct {
	URL     string `json:"url,omitempty"`
	Message string `json:"message,omitempty"`
}

// Rollout states.
const (
	StateProgressing = "Progressing"
	StateComplete    = "Complete"
	// StatePaused is a rollout held by spec.rollout.paused.
	StatePaused = "Paused"
	// StatePausedByFailures is a rollout that paused itself: a stage exceeded its failure budget.
	StatePausedByFailures = "PausedByFailures"
)

// Stage states.
const (
	StageWaiting  = "Waiting"  // an earlier stage has not finished (or not soaked)
	StageActive   = "Active"   // admitting its clusters
	StageSoaking  = "Soaking"  // every cluster runs the release healthy; the soak time runs
	StageComplete = "Complete" // finished and soaked
	StagePaused   = "Paused"   // would be active, but the rollout is paused
)

// Status is the rollout's state, as the version resolver reports it (DataRollout) and starts its next pass from.
type Status struct {
	// Release is the version being rolled out (the stream's target).
	Release string `json:"release"`
	// Baseline is the newest release whose rollout completed: what new clusters install.
	Baseline string `json:"baseline,omitempty"`
	State    string `json:"state"`
	Message  string `json:"message,omitempty"`
	// Revision changes whenever the admitted clusters or the state change: the applier's cue to look again.
	Revision int64 `json:"revision"`
	// PausedGeneration is the stream's generation when the rollout paused itself; a spec change after it (such as
	// `hyperfleet rollout resume`) resumes it.
	PausedGeneration int64 `json:"paused_generation,omitempty"`
	// BudgetGeneration is the stream generation from which failures count against the budget: a resume acknowledges
	// the failures before it.
	BudgetGeneration int64         `json:"budget_generation,omitempty"`
	Stages           []StageStatus `json:"stages"`
	// Failed are the clusters that failed the release (newest last, at most MaxFailuresListed).
	Failed []Failure `json:"failed,omitempty"`
	// Admitted are the clusters told to move and not finished yet, by cluster id.
	Admitted map[string]Admission `json:"admitted,omitempty"`
}

// StageStatus is one stage's progress on the rollout's release.
type StageStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Clusters int    `json:"clusters"`
	// Upgraded run the release and are healthy.
	Upgraded int `json:"upgraded"`
	// InProgress are admitted (or running the release, not yet healthy).
	InProgress int `json:"in_progress"`
	// WaitingWindow are admitted and wait for their UpgradeSchedule's window.
	WaitingWindow int `json:"waiting_window"`
	Failed        int `json:"failed"`
	// Blocked cannot move: no update path, a risk not accepted, a release pulled, or the cluster is paused.
	Blocked int `json:"blocked"`
	// Pending wait for their turn.
	Pending int `json:"pending"`
	// CompleteTime is when every cluster of the stage first ran the release healthy; SoakUntil adds the soak.
	CompleteTime *time.Time `json:"complete_time,omitempty"`
	SoakUntil    *time.Time `json:"soak_until,omitempty"`
}

// Failure is a cluster that failed the rollout's release.
type Failure struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Stage   string    `json:"stage"`
	Version string    `json:"version"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
	// Generation is the stream generation when the failure was seen (see Status.BudgetGeneration).
	Generation int64 `json:"generation"`
}

// Failure reasons.
const (
	FailedProgressDeadline = "ProgressDeadlineExceeded"
	FailedDegraded         = "DegradedAfterUpgrade"
)

// Admission is a cluster admitted to move to Version. It is written as a compact array [version, admitted,
// started] (started "" until the applier started the move), since hundreds fit in one report.
type Admission struct {
	Version  string
	Admitted time.Time
	// Started is when the cluster was first seen moving (its applier applied the image); zero before.
	Started time.Time
}

// MarshalJSON writes [version, admitted, started].
func (a Admission) MarshalJSON() ([]byte, error) {
	started := ""
	if !a.Started.IsZero() {
		started = a.Started.UTC().Format(time.RFC3339)
	}
	return json.Marshal([3]string{a.Version, a.Admitted.UTC().Format(time.RFC3339), started})
}

// UnmarshalJSON reads [version, admitted, started].
func (a *Admission) UnmarshalJSON(b []byte) error {
	var v [3]string
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	a.Version = v[0]
	var err error
	if a.Admitted, err = time.Parse(time.RFC3339, v[1]); err != nil {
		return fmt.Errorf("admission time: %w", err)
	}
	a.Started = time.Time{}
	if v[2] != "" {
		if a.Started, err = time.Parse(time.RFC3339, v[2]); err != nil {
			return fmt.Errorf("admission start: %w", err)
		}
	}
	return nil
}

// Report is the rollout part of the version resolver's report on a stream.
type Report struct {
	ReleaseImage    string
	ResolvedVersion string
	InstallImage    string
	InstallVersion  string
	Graph           *Graph
	Rollout         *Status
}

// ReportOf reads a report's data (a status report's `data`, or the keys of it an adapter follows). Keys that are
// absent read as zero: a stream resolved before rollouts existed has no graph and no rollout.
func ReportOf(data map[string]any) (*Report, error) {
	r := &Report{}
	r.ReleaseImage, _ = data[DataReleaseImage].(string)
	r.ResolvedVersion, _ = data[DataResolvedVersion].(string)
	r.InstallImage, _ = data[DataInstallImage].(string)
	r.InstallVersion, _ = data[DataInstallVersion].(string)
	if v, ok := data[DataGraph]; ok && v != nil {
		r.Graph = &Graph{}
		if err := recode(v, r.Graph); err != nil {
			return nil, fmt.Errorf("report %s: %w", DataGraph, err)
		}
	}
	if v, ok := data[DataRollout]; ok && v != nil {
		r.Rollout = &Status{}
		if err := recode(v, r.Rollout); err != nil {
			return nil, fmt.Errorf("report %s: %w", DataRollout, err)
		}
	}
	return r, nil
}

// Data is the report as status data.
func (r *Report) Data() (map[string]any, error) {
	data := map[string]any{DataReleaseImage: r.ReleaseImage, DataResolvedVersion: r.ResolvedVersion}
	if r.InstallImage != "" {
		data[DataInstallImage], data[DataInstallVersion] = r.InstallImage, r.InstallVersion
	}
	for key, v := range map[string]any{DataGraph: r.Graph, DataRollout: r.Rollout} {
		var m map[string]any
		if err := recode(v, &m); err != nil {
			return nil, fmt.Errorf("report %s: %w", key, err)
		}
		if m != nil {
			data[key] = m
		}
	}
	return data, nil
}

// Install returns what a new cluster installs: the install release, or the target before any rollout finished.
func (r *Report) Install() (version, image string) {
	if r.InstallImage != "" {
		return r.InstallVersion, r.InstallImage
	}
	return r.ResolvedVersion, r.ReleaseImage
}

func recode(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}
