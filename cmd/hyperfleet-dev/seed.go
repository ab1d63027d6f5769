package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The demo's resources, created by `up` unless they exist. The stream follows the minor cincinnati-sim serves a few
// patches of; the schedule is open all week, so that a published patch rolls at once, until a blackout closes it.
const (
	demoStream        = "stable-4-16"
	demoStreamVersion = "4.16"
	demoSchedule      = "anytime"
)

func demoScheduleSpec() api.UpgradeScheduleSpec {
	utc := "UTC"
	days := []api.UpgradeScheduleSpecWindowsDays{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	return api.UpgradeScheduleSpec{Timezone: &utc, Windows: &[]api.UpgradeWindow{{Days: days, Start: "00:00", Duration: "24h"}}}
}

// seed creates the demo's VersionStream and UpgradeSchedule through the API, leaving alone any that exists (a
// restart, or a developer who changed it), so that it can run on every start.
func (s *stack) seed(ctx context.Context, log *slog.Logger) error {
	opts := []api.ClientOption{api.WithHTTPClient(&http.Client{Timeout: 10 * time.Second})}
	if s.tokens != nil {
		token, err := s.tokens.mint("hyperfleet-dev", 10*time.Minute, auth.RoleUser)
		if err != nil {
			return err
		}
		opts = append(opts, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	}
	client, err := api.NewClientWithResponses("http://"+s.cfg.apiAddr, opts...)
	if err != nil {
		return err
	}
	return seedDemo(ctx, client, log)
}

// seedDemo creates what is missing of the demo's resources.
func seedDemo(ctx context.Context, client *api.ClientWithResponses, log *slog.Logger) error {
	stream, err := client.CreateVersionStreamWithResponse(ctx, api.VersionStreamCreate{
		Name: demoStream, Spec: api.VersionStreamSpec{TargetVersion: demoStreamVersion},
	})
	if err != nil {
		return fmt.Errorf("create VersionStream %s: %w", demoStream, err)
	}
	if err := seeded(log, "VersionStream", demoStream, stream.StatusCode(), stream.Body); err != nil {
		return err
	}
	schedule, err := client.CreateUpgradeScheduleWithResponse(ctx, api.UpgradeScheduleCreate{
		Name: demoSchedule, Spec: demoScheduleSpec(),
	})
	if err != nil {
		return fmt.Errorf("create UpgradeSchedule %s: %w", demoSchedule, err)
	}
	return seeded(log, "UpgradeSchedule", demoSchedule, schedule.StatusCode(), schedule.Body)
}

// seeded logs what a create did: 201 created it, 409 found the name taken (kept as it is).
func seeded(log *slog.Logger, kind, name string, status int, body []byte) error {
	switch status {
	case http.StatusCreated:
		log.Info("created", "kind", kind, "name", name)
	case http.StatusConflict:
		log.Info("exists; left as it is", "kind", kind, "name", name)
	default:
		return fmt.Errorf("create %s %s: %d %s", kind, name, status, body)
	}
	return nil
}
