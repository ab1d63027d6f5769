package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// tenant set changes only the quotas its flags give (none removes one), and tenant get shows use/limit.
func TestTenantSetAndGet(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false) // authentication off: every caller is an admin of the default tenant
	c := newCLI(t, s)
	require.Regexp(t, regexp.MustCompile(`(?m)^default\s+0/none\s+0/none\s+never$`), c.ok(t, "tenant", "get"))

	out := c.ok(t, "tenant", "set", "default", "--max-clusters", "10", "--max-nodepool-devices", "30")
	require.Regexp(t, regexp.MustCompile(`(?m)^default\s+0/10\s+0/30\s+\d+s ago by dev-admin$`), out)
	out = c.ok(t, "tenant", "set", "default", "--max-clusters", "none")
	require.Regexp(t, regexp.MustCompile(`(?m)^default\s+0/none\s+0/30\s`), out, "the device quota is kept")
	require.Contains(t, c.ok(t, "tenant", "get", "default", "-o", "json"), `"nodepool_devices": 30`)

	for _, args := range [][]string{
		{"tenant", "set", "default"},
		{"tenant", "set", "default", "--max-clusters", "-1"},
		{"tenant", "set", "default", "--max-nodepool-devices", "many"},
		{"tenant", "get", "a", "b"},
	} {
		c.fails(t, exitUsage, args...)
	}
}

// The tenant table, against testdata/golden (HYPERFLEET_UPDATE_GOLDEN=1 rewrites it).
func TestGoldenTenantTable(t *testing.T) {
	set := goldenNow.Add(-90 * time.Minute)
	tenant := &api.Tenant{Kind: "Tenant", Id: "acme", Href: "/api/hyperfleet/v1/tenants/acme",
		Quotas: api.TenantQuotas{Clusters: ptr(int64(10))}, Usage: api.TenantUsage{Clusters: 7, NodepoolDevices: 42},
		CreatedTime: &set, UpdatedTime: &set, UpdatedBy: ptr("root")}
	var out bytes.Buffer
	require.NoError(t, printTenantTable(&out, tenant, goldenNow))
	path := filepath.Join("testdata", "golden", "tenant.table.golden")
	if os.Getenv("HYPERFLEET_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run with HYPERFLEET_UPDATE_GOLDEN=1 and check what it wrote")
	require.Equal(t, string(want), out.String())
}
