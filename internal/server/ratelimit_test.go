package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/httpapi"
)

// The rate-limits file stops a server that starts on a bad one, and a changed file applies without a restart.
func TestTenantRateLimitsFile(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	none, err := tenantRateLimits(Config{}, log)
	require.NoError(t, err)
	require.Nil(t, none, "no file, no tenant budgets")

	path := filepath.Join(t.TempDir(), "rate-limits.yaml")
	cfg := Config{RateLimitsFile: path, JWT: auth.VerifierConfig{TenantClaim: "org_id"}}
	write := func(content string, at time.Time) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		require.NoError(t, os.Chtimes(path, at, at))
	}
	now := time.Now()
	write("tenants:\n  default: {writes: {rate: -5}}\n", now)
	_, err = tenantRateLimits(cfg, log)
	require.ErrorContains(t, err, "--rate-limits-file: rate-limits file "+path+": line 2: tenants.default.writes.rate: -5")

	write("tenants: {default: {writes: {rate: 5}}}\n", now.Add(time.Minute))
	get, err := tenantRateLimits(cfg, log)
	require.NoError(t, err)
	require.Equal(t, &httpapi.TenantRateLimits{Default: httpapi.ClassLimits{Writes: &httpapi.Limit{Rate: 5}}}, get())

	write("tenants: {default: {writes: {rate: 7, burst: 9}}}\n", now.Add(2*time.Minute))
	require.Equal(t, &httpapi.TenantRateLimits{Default: httpapi.ClassLimits{Writes: &httpapi.Limit{Rate: 7, Burst: 9}}}, get())
}
