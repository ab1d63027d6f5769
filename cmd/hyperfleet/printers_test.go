package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestAge(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{119 * time.Second, "119s"},
		{2 * time.Minute, "2m"},
		{5*time.Minute + 30*time.Second, "5m30s"},
		{45 * time.Minute, "45m"},
		{3*time.Hour + 20*time.Minute, "3h20m"},
		{5 * time.Hour, "5h"},
		{30 * time.Hour, "30h"},
		{53 * time.Hour, "2d5h"},
		{72 * time.Hour, "3d"},
		{40 * 24 * time.Hour, "40d"},
		{3 * 365 * 24 * time.Hour, "3y"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, age(now, now.Add(-tc.ago)))
		})
	}
	require.Equal(t, "<unknown>", age(now, time.Time{}))
}

func TestWindowsSummary(t *testing.T) {
	w := func(start, duration string, days ...api.UpgradeScheduleSpecWindowsDays) api.UpgradeWindow {
		return api.UpgradeWindow{Days: days, Start: start, Duration: duration}
	}
	tests := []struct {
		name    string
		windows []api.UpgradeWindow
		want    string
	}{
		{"none", nil, "always"},
		{"one", []api.UpgradeWindow{w("02:00", "4h", "Saturday", "Sunday")}, "Sat,Sun 02:00+4h"},
		{"two", []api.UpgradeWindow{w("02:00", "4h", "Saturday"), w("22:00", "90m", "Monday")}, "Sat 02:00+4h; Mon 22:00+90m"},
		{"more", []api.UpgradeWindow{w("01:00", "1h", "Monday"), w("02:00", "1h", "Tuesday"), w("03:00", "1h", "Friday")},
			"Mon 01:00+1h; Tue 02:00+1h; +1 more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, windowsSummary(tc.windows))
		})
	}
}

func TestConditionsSummary(t *testing.T) {
	reason := "AdaptersMissing"
	got := conditionsSummary([]api.Condition{
		{Type: "Ready", Status: "False", Reason: &reason},
		{Type: "Available", Status: "True"},
		{Type: "ApplierAvailable", Status: "Unknown"},
	})
	require.Equal(t, "Ready=False(AdaptersMissing),Available,ApplierAvailable=Unknown", got)
	require.Equal(t, "<none>", conditionsSummary(nil))
}
