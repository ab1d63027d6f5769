package hostedcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// versionResolver is the adapter whose report on a VersionStream holds the release image to apply.
const versionResolver = "version-resolver"

// Errors of the reference look-ups; the reconciler turns them into reasons.
var (
	ErrStreamNotFound   = errors.New("version stream not found")
	ErrImagePending     = errors.New("the version stream has no resolved release image yet")
	ErrScheduleNotFound = errors.New("upgrade schedule not found")
)

// StreamRollout is what a cluster's VersionStream says about the releases its clusters run: the version resolver's
// report (target, install release, graph slice, rollout state) and the stream's rollout policy.
type StreamRollout struct {
	Report *rollout.Report
	Policy rollout.Policy
}

// apiReferences reads a cluster's VersionStream and UpgradeSchedule: from what the runtime's dependents sources
// last saw (no request), or from the API when they have not seen it yet.
type apiReferences struct {
	runner interface {
		Referenced(kind *adapter.Kind, name string) (adapter.Reference, bool)
		API() *adapter.API
	}
	streams, schedules *adapter.Kind
}

// Stream returns the rollout of the stream named name: ErrStreamNotFound, or ErrImagePending before the version
// resolver has reported any image.
func (r *apiReferences) Stream(ctx context.Context, name string) (StreamRollout, error) {
	var (
		data map[string]any
		spec []byte
	)
	if ref, ok := r.runner.Referenced(r.streams, name); ok {
		data = ref.Data
		var err error
		if spec, err = json.Marshal(ref.Spec); err != nil {
			return StreamRollout{}, fmt.Errorf("version stream %q: %w", name, err)
		}
	} else {
		stream, err := r.runner.API().FindByName(ctx, r.streams, "", name)
		if errors.Is(err, adapter.ErrNotFound) {
			return StreamRollout{}, fmt.Errorf("%w: %q", ErrStreamNotFound, name)
		}
		if err != nil {
			return StreamRollout{}, err
		}
		spec = stream.Spec
		report, err := r.runner.API().Report(ctx, r.streams, "", stream.ID, versionResolver)
		if err != nil {
			return StreamRollout{}, err
		}
		if report != nil {
			data = report.Data
		}
	}
	return streamRolloutOf(name, data, spec)
}

// streamRolloutOf reads the resolver's report data and the stream's spec.
func streamRolloutOf(name string, data map[string]any, spec []byte) (StreamRollout, error) {
	report, err := rollout.ReportOf(data)
	if err != nil {
		return StreamRollout{}, fmt.Errorf("version stream %q: %w", name, err)
	}
	if report.ReleaseImage == "" && report.InstallImage == "" {
		return StreamRollout{}, fmt.Errorf("%w: %q", ErrImagePending, name)
	}
	if len(spec) == 0 || string(spec) == "null" {
		spec = []byte("{}")
	}
	policy, err := rollout.PolicyOf(spec)
	if err != nil {
		return StreamRollout{}, fmt.Errorf("version stream %q: %w", name, err)
	}
	return StreamRollout{Report: report, Policy: policy}, nil
}

// Schedule returns the parsed UpgradeSchedule named name, or ErrScheduleNotFound.
func (r *apiReferences) Schedule(ctx context.Context, name string) (*schedule.Schedule, error) {
	var raw []byte
	if ref, ok := r.runner.Referenced(r.schedules, name); ok {
		var err error
		if raw, err = json.Marshal(ref.Spec); err != nil {
			return nil, fmt.Errorf("upgrade schedule %q: %w", name, err)
		}
	} else {
		obj, err := r.runner.API().FindByName(ctx, r.schedules, "", name)
		if errors.Is(err, adapter.ErrNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
		}
		if err != nil {
			return nil, err
		}
		raw = obj.Spec
	}
	return parseSchedule(raw)
}

// parseSchedule reads an UpgradeScheduleSpec; the API has checked it with the same rules.
func parseSchedule(raw []byte) (*schedule.Schedule, error) {
	var spec api.UpgradeScheduleSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("decode upgrade schedule: %w", err)
	}
	var windows []schedule.WindowSpec
	for _, w := range deref(spec.Windows) {
		days := make([]string, len(w.Days))
		for i, d := range w.Days {
			days[i] = string(d)
		}
		windows = append(windows, schedule.WindowSpec{Days: days, Start: w.Start, Duration: w.Duration})
	}
	var blackouts []schedule.Blackout
	for _, b := range deref(spec.Blackouts) {
		blackouts = append(blackouts, schedule.Blackout{Start: b.Start, End: b.End})
	}
	return schedule.Parse(deref(spec.Timezone), windows, blackouts)
}
