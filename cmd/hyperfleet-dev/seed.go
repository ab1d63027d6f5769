package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The demo's resources, created by `up` unless they exist. The stream follows the minor cincinnati-sim serves a few
// patches of, in stages: a published patch reaches the canary first, then half of the early clusters at a time,
// then the rest. The schedule is open all week, so that a patch rolls as soon as a cluster's stage lets it, until a
// blackout closes it.
const (
	demoStream        = "stable-4-16"
	demoStreamVersion = "4.16"
	demoSchedule      = "anytime"
	// demoStageLabel is the label that puts a cluster in a stage of the demo stream's rollout.
	demoStageLabel = "hyperfleet.io/stage"
	// demoCanarySoak is how long the canary runs a new release healthy before the early stage starts: long enough to
	// see the other clusters wait, short enough to watch the whole rollout.
	demoCanarySoak = "30s"
)

// demoRollout is the demo stream's spec.rollout: a canary stage of one cluster at a time, an early stage that moves
// half of its clusters at once, and the rest.
func demoRollout() map[string]any {
	return map[string]any{"stages": []any{
		map[string]any{"name": "canary", "selector": demoStageLabel + "=canary", "max_at_once": 1, "soak": demoCanarySoak},
		map[string]any{"name": "early", "selector": demoStageLabel + "=early", "max_at_once": "50%"},
		map[string]any{"name": "rest"},
	}}
}

// demoRegion is the region of the local management clusters: a cluster that names it in spec.placement.region is
// placed on either.
const demoRegion = "local"

// demoResources are the demo's resources, in the order they are created, as the generic client creates them: the
// stream, the schedule, and a ManagementCluster for each local management cluster, naming its kubeconfig in the
// applier's credentials directory (the file named after it) and the namespace its kube component creates.
func demoResources(kinds *api.KindTable, mcs []devManagementCluster, namespace string) []demoResource {
	days := []any{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	out := []demoResource{
		{kinds.VersionStream, api.ResourceCreate{Name: demoStream, Spec: map[string]any{"target_version": demoStreamVersion, "rollout": demoRollout()}}},
		{kinds.UpgradeSchedule, api.ResourceCreate{Name: demoSchedule, Spec: map[string]any{"timezone": "UTC",
			"windows": []any{map[string]any{"days": days, "start": "00:00", "duration": "24h"}}}}},
	}
	for _, mc := range mcs {
		out = append(out, demoResource{kinds.ManagementCluster, api.ResourceCreate{Name: mc.name, Spec: map[string]any{
			"region": demoRegion, "namespace": namespace,
			"capacity":    map[string]any{"max_hosted_clusters": mc.maxHostedClusters},
			"credentials": map[string]any{"kubeconfig": mc.name},
		}}})
	}
	return out
}

// demoResource is one resource the demo needs.
type demoResource struct {
	kind *api.Kind
	body api.ResourceCreate
}

// seed creates the demo's VersionStream, UpgradeSchedule and ManagementClusters through the API, leaving alone any
// that exists (a restart, or a developer who changed it), so that it can run on every start.
func (s *stack) seed(ctx context.Context, log *slog.Logger) error {
	opts := []api.ClientOption{api.WithHTTPClient(&http.Client{Timeout: 10 * time.Second})}
	if s.tokens != nil {
		token, err := s.tokens.mint("hyperfleet-dev", 10*time.Minute, auth.RolePlatform)
		if err != nil {
			return err
		}
		opts = append(opts, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	}
	client, err := api.NewClient("http://"+s.cfg.apiAddr, opts...)
	if err != nil {
		return err
	}
	return seedDemo(ctx, client, demoResources(api.Kinds(), s.managementClusters(), s.cfg.namespace), log)
}

// seedDemo creates what is missing of resources: 201 created one, 409 found the name taken (kept as it is).
func seedDemo(ctx context.Context, client *api.Client, resources []demoResource, log *slog.Logger) error {
	for _, r := range resources {
		answer, err := api.ReadAnswer[api.Resource](client.CreateResource(ctx, r.kind, uuid.Nil, r.body))
		if err != nil {
			return fmt.Errorf("create %s %s: %w", r.kind.Name, r.body.Name, err)
		}
		switch answer.StatusCode() {
		case http.StatusCreated:
			log.Info("created", "kind", r.kind.Name, "name", r.body.Name)
		case http.StatusConflict:
			log.Info("exists; left as it is", "kind", r.kind.Name, "name", r.body.Name)
		default:
			return fmt.Errorf("create %s %s: %d %s", r.kind.Name, r.body.Name, answer.StatusCode(), answer.Body)
		}
	}
	return nil
}
