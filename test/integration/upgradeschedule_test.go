package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestUpgradeSchedulesAreValidatedAndReadyAtOnce(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	resp, err := s.CreateUpgradeScheduleWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(`{"name":"weekends","spec":{
		"timezone":"Europe/Berlin",
		"windows":[{"days":["Saturday","Sunday"],"start":"22:00","duration":"6h"}],
		"blackouts":[{"start":"2026-12-20T00:00:00Z","end":"2027-01-05T00:00:00Z","reason":"year-end freeze"}]}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	got := resp.JSON201
	require.Equal(t, api.ResourceStatusPhaseReady, got.Status.Phase, "no adapter is required for a schedule")
	require.Equal(t, "Europe/Berlin", *got.Spec.Timezone)

	defaulted, err := s.CreateUpgradeScheduleWithResponse(ctx, nil, api.UpgradeScheduleCreate{Name: "always", Spec: api.UpgradeScheduleSpec{}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, defaulted.StatusCode(), "body: %s", defaulted.Body)
	require.Equal(t, "UTC", *defaulted.JSON201.Spec.Timezone)

	tests := []struct {
		name  string
		spec  string
		field string
	}{
		{"unknown time zone", `{"timezone":"Mars/Olympus"}`, "spec.timezone"},
		{"Local is no zone", `{"timezone":"Local"}`, "spec.timezone"},
		{"day name", `{"windows":[{"days":["Sat"],"start":"22:00","duration":"6h"}]}`, "spec.windows[0].days[0]"},
		{"day twice", `{"windows":[{"days":["Monday","Monday"],"start":"22:00","duration":"6h"}]}`, "spec.windows[0].days"},
		{"start 24:00", `{"windows":[{"days":["Monday"],"start":"24:00","duration":"6h"}]}`, "spec.windows[0].start"},
		{"longer than a week", `{"windows":[{"days":["Monday"],"start":"22:00","duration":"169h"}]}`, "spec.windows[0].duration"},
		{"zero duration", `{"windows":[{"days":["Monday"],"start":"22:00","duration":"0h"}]}`, "spec.windows[0].duration"},
		{"blackout ends before it starts", `{"blackouts":[{"start":"2027-01-05T00:00:00Z","end":"2026-12-20T00:00:00Z"}]}`, "spec.blackouts[0]"},
		{"control character in a reason", `{"blackouts":[{"start":"2026-12-20T00:00:00Z","end":"2027-01-05T00:00:00Z","reason":"a\u0007b"}]}`,
			"spec.blackouts[0].reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.CreateUpgradeScheduleWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(`{"name":"bad","spec":`+tt.spec+`}`))
			require.NoError(t, err)
			p := problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-002")
			found := false
			for _, f := range fields(p) {
				found = found || strings.HasPrefix(f, tt.field)
			}
			require.True(t, found, "want a problem with %s, got %v", tt.field, fields(p))
		})
	}
}

// spec.upgrade_schedule is a checked reference, exactly like version_stream.
func TestClustersMustNameALiveUpgradeSchedule(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	body := func(name, schedule string) api.ClusterCreate {
		spec := clusterSpec(defaultStream)
		spec.UpgradeSchedule = &schedule
		return api.ClusterCreate{Name: name, Spec: spec}
	}
	missing, err := s.CreateClusterWithResponse(ctx, nil, body("orphan", "nights"))
	require.NoError(t, err)
	p := problem(t, missing.HTTPResponse, missing.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-006")
	require.Contains(t, fields(p), "spec.upgrade_schedule")

	sched, err := s.CreateUpgradeScheduleWithResponse(ctx, nil, api.UpgradeScheduleCreate{Name: "nights", Spec: api.UpgradeScheduleSpec{}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, sched.StatusCode(), "body: %s", sched.Body)
	created, err := s.CreateClusterWithResponse(ctx, nil, body("scheduled", "nights"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)

	inUse, err := s.DeleteUpgradeScheduleWithResponse(ctx, sched.JSON201.Id)
	require.NoError(t, err)
	p = problem(t, inUse.HTTPResponse, inUse.Body, http.StatusConflict, "HYPERFLEET-CNF-005")
	require.Contains(t, deref(p.Detail), "scheduled")

	// Pointing the cluster elsewhere frees the schedule.
	patched, err := s.PatchClusterWithBodyWithResponse(ctx, created.JSON201.Id, nil, "application/merge-patch+json",
		strings.NewReader(`{"spec":{"upgrade_schedule":null}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), "body: %s", patched.Body)
	freed, err := s.DeleteUpgradeScheduleWithResponse(ctx, sched.JSON201.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, freed.StatusCode(), "body: %s", freed.Body)
}
