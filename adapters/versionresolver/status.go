package versionresolver

import (
	"errors"
	"fmt"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Condition types the resolver reports besides the runtime's.
const (
	// ConditionImageResolved says whether the latest check resolved the stream to a release image.
	ConditionImageResolved = "ImageResolved"
	// ConditionResolvedVersionInGraph says whether the version the stream holds is still in its channel's graph;
	// the resolver never moves backwards, so it keeps a version that was pulled and says so here.
	ConditionResolvedVersionInGraph = "ResolvedVersionInGraph"
)

// Reasons of the resolver's conditions (and of Available).
const (
	ReasonResolved              = "Resolved"
	ReasonResolutionFailed      = "ResolutionFailed"
	ReasonVersionNotFound       = "VersionNotFound"
	ReasonInvalidSpec           = "InvalidSpec"
	ReasonCincinnatiUnavailable = "CincinnatiUnavailable"
	ReasonImageKnown            = "ImageKnown"
	ReasonInGraph               = "InGraph"
	ReasonRemovedFromGraph      = "RemovedFromGraph"
	ReasonDeleted               = "Deleted"
)

// Keys of the report's data.
const (
	DataReleaseImage    = "release_image"
	DataResolvedVersion = "resolved_version"
	DataChannel         = "channel"
	DataArch            = "arch"
	DataResolvedTime    = "resolved_time"
)

// Stream is a VersionStream's spec in Cincinnati's terms.
type Stream struct {
	Target          string // "4.16"
	Channel         string // "stable-4.16"
	Arch            string // "amd64"
	AllowPrerelease bool
}

// Resolution is what a stream resolved to; it is the report's data, and what the next check starts from.
type Resolution struct {
	Image   string
	Version string
	Channel string
	Arch    string
	// Time is when this version was first resolved; re-checks that find it again keep it.
	Time time.Time
}

func (r *Resolution) data() map[string]any {
	return map[string]any{DataReleaseImage: r.Image, DataResolvedVersion: r.Version, DataChannel: r.Channel,
		DataArch: r.Arch, DataResolvedTime: r.Time.UTC().Format(time.RFC3339)}
}

// lastResolution reads the previous resolution from the adapter's last report, if it was for the same channel
// and architecture: a stream retargeted to another minor starts afresh.
func lastResolution(last *adapter.Report, s Stream) *Resolution {
	if last == nil || last.DataString(DataReleaseImage) == "" {
		return nil
	}
	r := &Resolution{Image: last.DataString(DataReleaseImage), Version: last.DataString(DataResolvedVersion),
		Channel: last.DataString(DataChannel), Arch: last.DataString(DataArch)}
	if r.Channel != s.Channel || r.Arch != s.Arch || r.Version == "" {
		return nil
	}
	if t, err := time.Parse(time.RFC3339, last.DataString(DataResolvedTime)); err == nil {
		r.Time = t
	}
	return r
}

// orNow stamps a resolution whose time was lost (an unreadable resolved_time) with now.
func (r *Resolution) orNow(now time.Time) *Resolution {
	if r != nil && r.Time.IsZero() {
		c := *r
		c.Time = now
		return &c
	}
	return r
}

// resolve decides a stream's report from its previous resolution and the graph fetch (graph or graphErr). It is
// pure: the reconciler fetches, this decides. A non-nil error makes the runtime retry sooner and report
// Health=False; Available stays True whenever an image is known.
func resolve(s Stream, last *Resolution, graph *cincinnati.Graph, graphErr error, now time.Time) (adapter.Outcome, error) {
	where := s.Channel + "/" + s.Arch
	last = last.orNow(now)
	if graphErr != nil {
		reason := ReasonResolutionFailed
		if errors.Is(graphErr, cincinnati.ErrUnavailable) || errors.Is(graphErr, cincinnati.ErrBadResponse) {
			reason = ReasonCincinnatiUnavailable
		}
		out := adapter.Outcome{Conditions: []conditions.Reported{{Type: ConditionImageResolved, Status: conditions.False, Reason: reason,
			Message: graphErr.Error()}}}
		keep(&out, last, reason, "Cincinnati could not be asked")
		return out, adapter.Transient(reason, graphErr)
	}
	latest, err := cincinnati.Latest(graph, s.Target, s.AllowPrerelease)
	if err != nil {
		reason := ReasonVersionNotFound
		if !errors.Is(err, cincinnati.ErrVersionNotFound) {
			reason = ReasonInvalidSpec
		}
		out := adapter.Outcome{Conditions: []conditions.Reported{{Type: ConditionImageResolved, Status: conditions.False, Reason: reason,
			Message: fmt.Sprintf("no release of %s in %s: %v", s.Target, where, err)}}}
		keep(&out, last, reason, "its channel has no release of "+s.Target)
		if last != nil {
			out.Conditions = append(out.Conditions, inGraph(graph, last, s))
		}
		if reason == ReasonInvalidSpec {
			return out, adapter.Terminal(reason, err)
		}
		return out, adapter.Transient(reason, err)
	}
	chosen := &Resolution{Image: latest.Image, Version: latest.Version, Channel: s.Channel, Arch: s.Arch, Time: now}
	// Never backwards: a graph whose newest is older than (or equal to) what the stream holds keeps it.
	if last != nil && !cincinnati.Newer(latest.Version, last.Version) {
		chosen = last
	}
	return adapter.Outcome{
		Available: conditions.Reported{Status: conditions.True, Reason: ReasonResolved, Message: fmt.Sprintf("%s resolves to %s", where, chosen.Version)},
		Conditions: []conditions.Reported{
			{Type: ConditionImageResolved, Status: conditions.True, Reason: ReasonResolved, Message: fmt.Sprintf("%s: %s is %s", where, chosen.Version, chosen.Image)},
			inGraph(graph, chosen, s),
		},
		Data: chosen.data(),
	}, nil
}

// keep makes the outcome of a failed check hold on to the last resolution, if any: clusters keep a working image.
func keep(out *adapter.Outcome, last *Resolution, reason, why string) {
	if last == nil {
		out.Available = conditions.Reported{Status: conditions.False, Reason: reason, Message: "no release image is known: " + why}
		return
	}
	out.Available = conditions.Reported{Status: conditions.True, Reason: ReasonImageKnown,
		Message: fmt.Sprintf("keeping %s (%s): %s", last.Version, last.Image, why)}
	out.Data = last.data()
}

func inGraph(g *cincinnati.Graph, r *Resolution, s Stream) conditions.Reported {
	if _, ok := cincinnati.Find(g, r.Version); ok {
		return conditions.Reported{Type: ConditionResolvedVersionInGraph, Status: conditions.True, Reason: ReasonInGraph}
	}
	return conditions.Reported{Type: ConditionResolvedVersionInGraph, Status: conditions.False, Reason: ReasonRemovedFromGraph,
		Message: fmt.Sprintf("%s is no longer in %s/%s; keeping it, since the resolver never moves backwards", r.Version, s.Channel, s.Arch)}
}
