package hivelocity

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

type cond struct {
	Status conditions.Status
	Reason string
}

// conditionsOf returns out's Available and own conditions by type, failing if a type appears twice or a False
// condition says nothing.
func conditionsOf(tb testing.TB, out adapter.Outcome) map[string]cond {
	tb.Helper()
	got := map[string]cond{conditions.Available: {out.Available.Status, out.Available.Reason}}
	if out.Available.Status == conditions.False {
		require.NotEmpty(tb, out.Available.Message, "Available is False without a message")
	}
	for _, c := range out.Conditions {
		_, dup := got[c.Type]
		require.False(tb, dup, "condition %s reported twice", c.Type)
		if c.Status == conditions.False {
			require.NotEmpty(tb, c.Message, "condition %s is False without a message", c.Type)
		}
		got[c.Type] = cond{c.Status, c.Reason}
	}
	return got
}

func rows(states ...State) []deviceRow {
	out := make([]deviceRow, len(states))
	for i, s := range states {
		out[i] = deviceRow{ID: int32(100 + i), Slot: i, State: s, Power: hvclient.PowerOn, PrimaryIP: fmt.Sprintf("192.0.2.%d", i), //nolint:gosec // small
			Since: epoch}
	}
	return out
}

func TestOutcomeOf(t *testing.T) {
	var (
		ready        = cond{conditions.True, ReasonAllDevicesReady}
		provisioning = cond{conditions.False, ReasonDevicesProvisioning}
		rolling      = cond{conditions.False, ReasonRollingUpdate}
		noDevice     = cond{conditions.False, ReasonNoAvailableDevice}
		eligible     = cond{conditions.True, ReasonDevicesEligible}
		noneNeeded   = cond{conditions.True, ReasonNoneNeeded}
		keyOK        = cond{conditions.True, ReasonKeyAccepted}
		reachable    = cond{conditions.True, ReasonReachable}
		healthy      = cond{conditions.False, ReasonNoFailures}
		remediated   = cond{conditions.True, ReasonDeviceRemediated}
		notChecked   = cond{conditions.Unknown, ReasonNotChecked}
	)
	stuck := remediation{DeviceID: 107, Slot: 2, Why: "caphv-permanent-error=reloading-since-2026-03-04T10:00:00Z", At: epoch}
	tests := []struct {
		name string
		s    summary
		want map[string]cond
	}{
		{
			name: "all ready",
			s:    summary{Replicas: 3, Devices: rows(StateReady, StateReady, StateReady), Spares: 2},
			want: map[string]cond{"Available": ready, "DevicesReady": ready, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "an empty pool of zero is ready",
			s:    summary{Replicas: 0},
			want: map[string]cond{"Available": ready, "DevicesReady": ready, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "provisioning with spares for the rest",
			s:    summary{Replicas: 3, Devices: rows(StateReady, StateInstalling), Missing: 1, Spares: 4},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": eligible, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "no spare for the missing ones",
			s:    summary{Replicas: 3, Devices: rows(StateReady), Missing: 2, Spares: 1, Skips: map[SkipReason]int{SkipRegion: 6, SkipOwned: 3}},
			want: map[string]cond{"Available": noDevice, "DevicesReady": noDevice, "DevicesAvailable": noDevice, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "no spare, but one is provisioning: still provisioning",
			s:    summary{Replicas: 2, Devices: rows(StateReloading), Missing: 1},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": noDevice, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "rolling: outdated devices serve, but the pool has not converged",
			s:    summary{Replicas: 3, Devices: rows(StateOutdated, StateReady, StateOutdated)},
			want: map[string]cond{"Available": rolling, "DevicesReady": rolling, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "rolling, one down",
			s:    summary{Replicas: 3, Devices: rows(StateOutdated, StateReady, StateReloading)},
			want: map[string]cond{"Available": rolling, "DevicesReady": rolling, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "scaled down, still releasing: not converged",
			s:    summary{Replicas: 2, Devices: rows(StateReady, StateReady, StateReleasing)},
			want: map[string]cond{"Available": {conditions.False, ReasonScaling}, "DevicesReady": ready, "DevicesAvailable": noneNeeded,
				"CredentialsValid": keyOK, "HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "a device being taken out while its replacement is ready: not converged",
			s:    summary{Replicas: 2, Devices: rows(StateReady, StateReady, StateRemediating)},
			want: map[string]cond{"Available": {conditions.False, ReasonScaling}, "DevicesReady": ready, "DevicesAvailable": noneNeeded,
				"CredentialsValid": keyOK, "HivelocityAPIReachable": reachable, "Degraded": remediated},
		},
		{
			name: "remediation held back",
			s:    summary{Replicas: 3, Devices: rows(StateRemediating, StateFailed, StateFailed), Held: 2, InRemediation: 1, MaxUnhealthy: 1},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": {conditions.True, ReasonRemediationHeldBack}},
		},
		{
			name: "a device replaced: degraded until the pool is whole",
			s:    summary{Replicas: 3, Devices: rows(StateReady, StateReady, StateClaimed), Spares: 1, Remediated: []remediation{stuck}},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": remediated},
		},
		{
			name: "a failed device not yet replaced",
			s:    summary{Replicas: 1, Devices: rows(StateFailed), Spares: 1},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": remediated},
		},
		{
			name: "the key is refused",
			s:    summary{Replicas: 1, APIErr: &hvclient.Error{Op: "GetBareMetalDeviceResource", Status: 401}},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": noneNeeded,
				"CredentialsValid": {conditions.False, ReasonUnauthorized}, "HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "no key file",
			s:    summary{Replicas: 1, APIErr: fmt.Errorf("%w: API key file: gone", hvclient.ErrUnauthorized)},
			want: map[string]cond{"Available": provisioning, "DevicesReady": provisioning, "DevicesAvailable": noneNeeded,
				"CredentialsValid": {conditions.False, ReasonUnauthorized}, "HivelocityAPIReachable": notChecked, "Degraded": healthy},
		},
		{
			name: "rate limited",
			s:    summary{Replicas: 1, Devices: rows(StateReady), APIErr: fmt.Errorf("list: %w", hvclient.ErrRateLimited)},
			want: map[string]cond{"Available": ready, "DevicesReady": ready, "DevicesAvailable": noneNeeded, "CredentialsValid": notChecked,
				"HivelocityAPIReachable": {conditions.False, ReasonRateLimited}, "Degraded": healthy},
		},
		{
			name: "unreachable",
			s:    summary{Replicas: 1, Devices: rows(StateReady), APIErr: fmt.Errorf("list: %w", hvclient.ErrUnavailable)},
			want: map[string]cond{"Available": ready, "DevicesReady": ready, "DevicesAvailable": noneNeeded, "CredentialsValid": notChecked,
				"HivelocityAPIReachable": {conditions.False, ReasonUnavailable}, "Degraded": healthy},
		},
		{
			name: "a refused action is an answer",
			s:    summary{Replicas: 1, Devices: rows(StateReady), APIErr: fmt.Errorf("reload: %w", hvclient.ErrRejected)},
			want: map[string]cond{"Available": ready, "DevicesReady": ready, "DevicesAvailable": noneNeeded, "CredentialsValid": keyOK,
				"HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "no such SSH key",
			s:    summary{Replicas: 2, Missing: 2, Spares: 5, Blocked: fmt.Errorf("%w: %q", errSSHKeyNotFound, "ops")},
			want: map[string]cond{"Available": {conditions.False, ReasonSSHKeyNotFound}, "DevicesReady": {conditions.False, ReasonSSHKeyNotFound},
				"DevicesAvailable": eligible, "CredentialsValid": keyOK, "HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "an invalid spec",
			s:    summary{Replicas: 0, Blocked: fmt.Errorf("%w: no region", ErrInvalidSpec)},
			want: map[string]cond{"Available": {conditions.False, ReasonInvalidSpec}, "DevicesReady": {conditions.False, ReasonInvalidSpec},
				"DevicesAvailable": noneNeeded, "CredentialsValid": keyOK, "HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "deleting",
			s:    summary{Finalizing: true, Devices: rows(StateReleasing)},
			want: map[string]cond{"Available": {conditions.False, ReasonReleasing}, "DevicesReady": {conditions.False, ReasonReleasing},
				"DevicesAvailable": noneNeeded, "CredentialsValid": keyOK, "HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
		{
			name: "deleted",
			s:    summary{Finalizing: true, Finalized: true},
			want: map[string]cond{"Available": {conditions.False, ReasonReleased}, "DevicesReady": {conditions.False, ReasonReleased},
				"DevicesAvailable": noneNeeded, "CredentialsValid": keyOK, "HivelocityAPIReachable": reachable, "Degraded": healthy},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := outcomeOf(tt.s)
			require.Equal(t, tt.want, conditionsOf(t, out))
			require.Equal(t, tt.s.Finalized, out.Finalized)
		})
	}
}

func TestOutcomeMessages(t *testing.T) {
	out := outcomeOf(summary{Replicas: 5, Devices: rows(StateReady, StateReady, StateOutdated, StateInstalling), Missing: 1, Spares: 0,
		Skips: map[SkipReason]int{SkipRegion: 6, SkipOwned: 3}})
	msgs := map[string]string{}
	for _, c := range out.Conditions {
		msgs[c.Type] = c.Message
	}
	require.Equal(t, "2/5 devices ready (1 on the previous spec, 1 provisioning, 1 missing)", msgs[ConditionDevicesReady])
	require.Equal(t, "1 devices missing but 0 eligible spare devices; skipped: 6 in another region, 3 owned by another pool", msgs[ConditionDevicesAvailable])
}

func TestRefusalMessages(t *testing.T) {
	wipe := refusal{DeviceID: 101, Call: callWipe, Message: "HTTP 403: Device is locked.", Count: 3, Next: epoch.Add(time.Minute)}
	t.Run("deletion says what blocks it and how to force it", func(t *testing.T) {
		out := outcomeOf(summary{Finalizing: true, Devices: rows(StateReady), Refusals: []refusal{wipe}})
		msg := condMessage(out, ConditionDevicesReady)
		require.Contains(t, msg, "device 101: wipe (reload) refused 3 time(s) in a row")
		require.Contains(t, msg, "HTTP 403: Device is locked.")
		require.Contains(t, msg, "remove the hyperfleet-* tags of device 101 by hand")
	})
	t.Run("a serving pool names the refused device", func(t *testing.T) {
		out := outcomeOf(summary{Replicas: 1, Devices: rows(StateOutdated), Refusals: []refusal{{DeviceID: 100, Call: callShutdown, Message: "no", Count: 1}}})
		require.Contains(t, condMessage(out, ConditionDevicesReady), "device 100: shutdown refused 1 time(s)")
	})
	t.Run("escalated only at the limit", func(t *testing.T) {
		require.NoError(t, escalated([]refusal{{DeviceID: 1, Count: 2}}, 3))
		err := escalated([]refusal{{DeviceID: 1, Count: 2}, wipe}, 3)
		require.ErrorContains(t, err, "device 101: wipe (reload) refused 3 time(s)")
		require.NotContains(t, err.Error(), "device 1:")
	})
}

func condMessage(out adapter.Outcome, typ string) string {
	for _, c := range out.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

func TestData(t *testing.T) {
	released := deviceRow{ID: 99, Slot: -1, State: StateReleasing, Power: hvclient.PowerOff, Since: epoch}
	s := summary{Replicas: 2, Devices: append([]deviceRow{released}, rows(StateReady, StateInstalling)...), Spec: spec,
		Remediated: []remediation{{DeviceID: 7, Slot: 1, Why: "caphv-permanent-error=x", At: epoch}}}
	// Keys spelled out: they are what operators and dashboards read.
	require.Equal(t, map[string]any{
		"devices": []any{
			map[string]any{"device_id": int32(100), "slot": 0, "state": "ready", "power": "ON", "primary_ip": "192.0.2.0", "since": "2026-03-04T10:00:00Z"},
			map[string]any{"device_id": int32(101), "slot": 1, "state": "installing", "power": "ON", "primary_ip": "192.0.2.1", "since": "2026-03-04T10:00:00Z"},
			map[string]any{"device_id": int32(99), "slot": -1, "state": "releasing", "power": "OFF", "primary_ip": "", "since": "2026-03-04T10:00:00Z"},
		},
		"ready": 1, "replicas": 2, "spec": spec,
		"remediated": []any{map[string]any{"device_id": int32(7), "slot": 1, "why": "caphv-permanent-error=x", "time": "2026-03-04T10:00:00Z"}},
	}, outcomeOf(s).Data)

	many := summary{Replicas: 300}
	for i := range 300 {
		many.Devices = append(many.Devices, deviceRow{ID: int32(i), Slot: i, State: StateReady, Since: epoch}) //nolint:gosec // small
	}
	data := outcomeOf(many).Data
	require.Len(t, data[DataDevices], maxReportedDevices)
	require.Equal(t, 100, data[DataDevicesOmitted])
}

func TestCarry(t *testing.T) {
	a := remediation{DeviceID: 1, Why: "x", At: epoch}
	b := remediation{DeviceID: 2, Why: "y", At: epoch.Add(time.Minute)}
	tests := []struct {
		name       string
		earlier    []remediation
		now        []remediation
		fullyReady bool
		want       []remediation
	}{
		{name: "kept until the pool is whole", earlier: []remediation{a}, want: []remediation{a}},
		{name: "dropped once it is", earlier: []remediation{a}, fullyReady: true},
		{name: "new ones added", earlier: []remediation{a}, now: []remediation{b}, want: []remediation{a, b}},
		{name: "no duplicates", earlier: []remediation{a}, now: []remediation{a}, want: []remediation{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, carry(tt.earlier, tt.now, tt.fullyReady))
		})
	}
	var many []remediation
	for i := range 30 {
		many = append(many, remediation{DeviceID: int32(i), Why: "x"}) //nolint:gosec // small
	}
	got := carry(nil, many, false)
	require.Len(t, got, maxRemediations)
	require.Equal(t, int32(29), got[len(got)-1].DeviceID, "the newest are kept")
}

func TestLastReportReadsWhatOutcomeWrote(t *testing.T) {
	s := summary{Replicas: 2, Devices: rows(StateReady, StateInstalling), Remediated: []remediation{{DeviceID: 7, Slot: 1, Why: "w", At: epoch}}}
	data := outcomeOf(s).Data
	// The API stores the data as JSON: numbers come back as float64.
	raw := map[string]any{}
	for k, v := range data {
		raw[k] = v
	}
	last := lastReportOf(&adapter.Report{Data: jsonRoundTrip(t, raw)})
	require.Equal(t, map[int32]deviceRow{
		100: {ID: 100, Slot: 0, State: StateReady, Since: epoch},
		101: {ID: 101, Slot: 1, State: StateInstalling, Since: epoch},
	}, last.devices)
	require.Equal(t, []remediation{{DeviceID: 7, Slot: 1, Why: "w", At: epoch}}, last.remediated)
	require.Empty(t, lastReportOf(nil).devices)
}

// jsonRoundTrip returns v as the API returns it: through JSON.
func jsonRoundTrip(tb testing.TB, v map[string]any) map[string]any {
	tb.Helper()
	raw, err := json.Marshal(v)
	require.NoError(tb, err)
	var out map[string]any
	require.NoError(tb, json.Unmarshal(raw, &out))
	return out
}

func TestTransient(t *testing.T) {
	tests := []struct {
		err  error
		want string // the reason, for the test's name
	}{
		{err: fmt.Errorf("x: %w", hvclient.ErrRateLimited), want: ReasonRateLimited},
		{err: fmt.Errorf("x: %w", hvclient.ErrUnauthorized), want: ReasonUnauthorized},
		{err: fmt.Errorf("x: %w", hvclient.ErrUnavailable), want: ReasonUnavailable},
		{err: fmt.Errorf("%w: ops", errSSHKeyNotFound), want: ReasonSSHKeyNotFound},
		{err: fmt.Errorf("%w: Ubuntu 18.04", errOSNotOffered), want: ReasonOSNotOffered},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			err := transient(tt.err)
			require.ErrorIs(t, err, adapter.ErrTransient)
			require.NotErrorIs(t, err, adapter.ErrTerminal)
			require.ErrorIs(t, err, tt.err)
		})
	}
}
