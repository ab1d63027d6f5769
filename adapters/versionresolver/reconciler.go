// Package versionresolver is the version-resolver adapter: it resolves each VersionStream (an OpenShift minor,
// a channel group and an architecture) to the latest patch release and its image through the Cincinnati update
// graph, and reports them in its status data for the HostedCluster applier to pin.
package versionresolver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Name is the adapter name the resolver reports under.
const Name = "version-resolver"

// Re-check intervals from the adapter spec.
const (
	DefaultRecheckAfter = 5 * time.Minute
	DefaultRetryAfter   = time.Minute
)

// Reconciler resolves VersionStreams. Graphs is required; zero intervals take the defaults.
type Reconciler struct {
	Graphs GraphSource
	// RecheckAfter is how soon a resolved stream is checked again for a newer patch.
	RecheckAfter time.Duration
	// RetryAfter is how soon a failed check is tried again.
	RetryAfter time.Duration
	// Now is the clock of resolved_time; nil is time.Now.
	Now func() time.Time
	// Log receives a line whenever a stream moves to another release; nil logs nothing.
	Log *slog.Logger
	// Fleet lists a stream's clusters for the rollout pass; nil resolves streams without rolling them out (the
	// clusters then read only release_image).
	Fleet Fleet
	// RolloutInterval is how soon a stream whose rollout moves is looked at again; zero is DefaultRolloutInterval.
	RolloutInterval time.Duration
}

var _ adapter.Reconciler = (*Reconciler)(nil)

// Check returns an error if a required dependency is missing; call it before running.
func (r *Reconciler) Check() error {
	if r.Graphs == nil {
		return errors.New("version resolver: no Cincinnati graph source")
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// Reconcile resolves obj's stream and schedules its next check.
func (r *Reconciler) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	stream, err := streamOf(obj.Spec)
	if err != nil {
		return adapter.Outcome{
			Available:  conditions.Reported{Status: conditions.False, Reason: ReasonInvalidSpec, Message: err.Error()},
			Conditions: []conditions.Reported{{Type: ConditionImageResolved, Status: conditions.False, Reason: ReasonInvalidSpec, Message: err.Error()}},
		}, adapter.Terminal(ReasonInvalidSpec, err)
	}
	graph, graphErr := r.Graphs.Graph(ctx, stream.Channel, stream.Arch)
	out, err := resolve(stream, lastResolution(obj.LastReport, stream), graph, graphErr, r.now().UTC().Truncate(time.Second))
	r.logMove(ctx, obj, out)
	out.RequeueAfter = spread(cmp.Or(r.RecheckAfter, DefaultRecheckAfter))
	if err != nil {
		out.RequeueAfter = spread(cmp.Or(r.RetryAfter, DefaultRetryAfter))
	}
	if r.Fleet != nil && out.Data != nil && !errors.Is(err, adapter.ErrTerminal) {
		if graphErr != nil {
			graph = nil
		}
		soon, passErr := r.rolloutPass(ctx, obj, stream, graph, &out)
		if soon > 0 {
			out.RequeueAfter = min(out.RequeueAfter, soon)
		}
		if err == nil {
			err = passErr
		}
	}
	return out, err
}

// logMove logs a stream whose report names another release image than its last one did (or the first one): the
// moment clusters on the stream start rolling, which an operator looks for in the logs.
func (r *Reconciler) logMove(ctx context.Context, obj *adapter.Object, out adapter.Outcome) {
	image, _ := out.Data[DataReleaseImage].(string)
	oldImage := obj.LastReport.DataString(DataReleaseImage)
	if r.Log == nil || image == "" || image == oldImage {
		return
	}
	version, _ := out.Data[DataResolvedVersion].(string)
	channel, _ := out.Data[DataChannel].(string)
	arch, _ := out.Data[DataArch].(string)
	r.Log.LogAttrs(ctx, slog.LevelInfo, "version stream moved to a new release",
		slog.String("stream", obj.Name), slog.String("id", obj.ID), slog.String("channel", channel), slog.String("arch", arch),
		slog.String("old_version", obj.LastReport.DataString(DataResolvedVersion)), slog.String("new_version", version),
		slog.String("old_image", oldImage), slog.String("new_image", image))
}

// Finalize has nothing to clean up: a stream lives only in the API.
func (r *Reconciler) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{
		Available: conditions.Reported{Status: conditions.False, Reason: ReasonDeleted, Message: "the stream is being deleted"},
		Finalized: true,
	}, nil
}

// spread scatters a re-check by ±10 %, so that streams resolved together (a fleet created at once, a restart)
// do not all come back within the same seconds.
func spread(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64())) //nolint:gosec // jitter, not a secret
}

// streamOf reads a VersionStream spec; the API has validated it, so an error here means API and resolver
// disagree on the schema.
func streamOf(raw json.RawMessage) (Stream, error) {
	var spec api.VersionStreamSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return Stream{}, fmt.Errorf("decode spec: %w", err)
	}
	group := string(api.VersionStreamSpecChannelGroupStable)
	if spec.ChannelGroup != nil {
		group = string(*spec.ChannelGroup)
	}
	arch := string(api.VersionStreamSpecArchAmd64)
	if spec.Arch != nil {
		arch = string(*spec.Arch)
	}
	arch, err := cincinnati.Arch(arch)
	if err != nil {
		return Stream{}, err
	}
	if err := cincinnati.CheckTarget(spec.TargetVersion); err != nil {
		return Stream{}, err
	}
	return Stream{Target: spec.TargetVersion, Channel: cincinnati.Channel(group, spec.TargetVersion), Arch: arch,
		AllowPrerelease: cincinnati.AllowsPrerelease(group)}, nil
}
