package hostedcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// versionResolver is the adapter whose report on a VersionStream holds the release image to apply.
const versionResolver = "version-resolver"

// Keys of the version resolver's report data that the applier follows.
const (
	resolverReleaseImage    = "release_image"
	resolverResolvedVersion = "resolved_version"
)

// Errors of the reference look-ups; the reconciler turns them into reasons.
var (
	ErrStreamNotFound   = errors.New("version stream not found")
	ErrImagePending     = errors.New("the version stream has no resolved release image yet")
	ErrScheduleNotFound = errors.New("upgrade schedule not found")
)

// Release is what a cluster's VersionStream resolves to.
type Release struct {
	Image   string
	Version string
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

// Release returns the release the stream named name resolves to: ErrStreamNotFound, or ErrImagePending before the
// version resolver has reported one.
func (r *apiReferences) Release(ctx context.Context, name string) (Release, error) {
	var data map[string]any
	if ref, ok := r.runner.Referenced(r.streams, name); ok {
		data = ref.Data
	} else {
		stream, err := r.runner.API().FindByName(ctx, r.streams, "", name)
		if errors.Is(err, adapter.ErrNotFound) {
			return Release{}, fmt.Errorf("%w: %q", ErrStreamNotFound, name)
		}
		if err != nil {
			return Release{}, err
		}
		report, err := r.runner.API().Report(ctx, r.streams, "", stream.ID, versionResolver)
		if err != nil {
			return Release{}, err
		}
		if report != nil {
			data = report.Data
		}
	}
	image, _ := data[resolverReleaseImage].(string)
	version, _ := data[resolverResolvedVersion].(string)
	if image == "" {
		return Release{}, fmt.Errorf("%w: %q", ErrImagePending, name)
	}
	return Release{Image: image, Version: version}, nil
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
