package httpapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTenantRateLimits(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    *TenantRateLimits
		wantErr string
	}{
		{name: "empty", file: "", want: &TenantRateLimits{}},
		{name: "null", file: "~\n", want: &TenantRateLimits{}},
		{name: "no tenants", file: "tenants:\n", want: &TenantRateLimits{}},
		{name: "the documented example", file: `
tenants:
  default: {reads: {rate: 50, burst: 100}, writes: {rate: 10, burst: 20}, watches: {rate: 1, burst: 5}}
  overrides:
    acme: {writes: {rate: 50, burst: 50}}
`, want: &TenantRateLimits{
			Default:   ClassLimits{Reads: &Limit{Rate: 50, Burst: 100}, Writes: &Limit{Rate: 10, Burst: 20}, Watches: &Limit{Rate: 1, Burst: 5}},
			Overrides: map[string]ClassLimits{"acme": {Writes: &Limit{Rate: 50, Burst: 50}}},
		}},
		{name: "JSON", file: `{"tenants": {"default": {"writes": {"rate": 0.5}}, "overrides": {"7": {"reads": {}}}}}`,
			want: &TenantRateLimits{Default: ClassLimits{Writes: &Limit{Rate: 0.5}}, Overrides: map[string]ClassLimits{"7": {Reads: &Limit{}}}}},
		{name: "an alias", file: "tenants:\n  default: {writes: &w {rate: 2}, reads: *w}\n",
			want: &TenantRateLimits{Default: ClassLimits{Writes: &Limit{Rate: 2}, Reads: &Limit{Rate: 2}}}},
		{name: "unknown section", file: "tenants: {}\nusers: {}\n", wantErr: `line 2: the file: unknown key "users" (want tenants)`},
		{name: "unknown tenants key", file: "tenants:\n  defaults: {}\n", wantErr: `line 2: tenants: unknown key "defaults" (want default, overrides)`},
		{name: "unknown class", file: "tenants:\n  default:\n    deletes: {rate: 1}\n",
			wantErr: `line 3: tenants.default: unknown key "deletes" (want reads, writes, watches)`},
		{name: "unknown limit key", file: "tenants:\n  overrides:\n    acme:\n      writes: {rate: 1, brust: 2}\n",
			wantErr: `line 4: tenants.overrides.acme.writes: unknown key "brust" (want rate, burst)`},
		{name: "negative rate", file: "tenants:\n  default:\n    reads:\n      rate: -1\n",
			wantErr: "line 4: tenants.default.reads.rate: -1 is not 0 (unlimited) or a positive number of requests per second"},
		{name: "negative burst", file: "tenants:\n  default: {reads: {rate: 1, burst: -3}}\n",
			wantErr: "line 2: tenants.default.reads.burst: -3 is not 0 (one second's worth) or a positive whole number"},
		{name: "fractional burst", file: "tenants:\n  default: {reads: {burst: 1.5}}\n",
			wantErr: "line 2: tenants.default.reads.burst: 1.5 is not 0 (one second's worth) or a positive whole number"},
		{name: "huge burst", file: "tenants:\n  default: {reads: {burst: 99999999999}}\n",
			wantErr: "line 2: tenants.default.reads.burst: 99999999999 is not 0"},
		{name: "rate as a string", file: "tenants:\n  default: {reads: {rate: \"10\"}}\n",
			wantErr: `line 2: tenants.default.reads.rate: "10" is not a number`},
		{name: "rate not a number", file: "tenants:\n  default: {reads: {rate: .nan}}\n",
			wantErr: "line 2: tenants.default.reads.rate: .nan is not 0 (unlimited)"},
		{name: "infinite rate", file: "tenants:\n  default: {reads: {rate: .inf}}\n", wantErr: "line 2: tenants.default.reads.rate: .inf is not 0"},
		{name: "a class given twice", file: "tenants:\n  default:\n    reads: {rate: 1}\n    reads: {rate: 2}\n",
			wantErr: `line 4: tenants.default: "reads" given twice`},
		{name: "a tenant given twice", file: "tenants:\n  overrides:\n    acme: {}\n    acme: {}\n",
			wantErr: `line 4: tenants.overrides: "acme" given twice`},
		{name: "an empty tenant", file: "tenants:\n  overrides:\n    \"\": {reads: {rate: 1}}\n",
			wantErr: "line 3: tenants.overrides: a tenant's name is empty"},
		{name: "a list for a mapping", file: "tenants:\n  default: [reads]\n", wantErr: "line 2: tenants.default must be a mapping"},
		{name: "a number for a limit", file: "tenants:\n  default: {reads: 5}\n", wantErr: "line 2: tenants.default.reads must be a mapping"},
		{name: "not YAML", file: "tenants: {\n", wantErr: "yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTenantRateLimits([]byte(tt.file))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestLoadTenantRateLimitsNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate-limits.yaml")
	require.NoError(t, os.WriteFile(path, []byte("tenants:\n  default: {reads: {rate: -1}}\n"), 0o600))
	_, err := LoadTenantRateLimits(path)
	require.ErrorContains(t, err, "rate-limits file "+path+": line 2: tenants.default.reads.rate: -1")
	_, err = LoadTenantRateLimits(filepath.Join(t.TempDir(), "absent.yaml"))
	require.ErrorContains(t, err, "read rate-limits file")
}

func TestTenantRateLimitsFor(t *testing.T) {
	limits := &TenantRateLimits{
		Default:   ClassLimits{Reads: &Limit{Rate: 50}, Writes: &Limit{Rate: 10}},
		Overrides: map[string]ClassLimits{"acme": {Writes: &Limit{Rate: 0}, Watches: &Limit{Rate: 2, Burst: 4}}},
	}
	tests := []struct {
		tenant string
		class  routeClass
		want   Limit
	}{
		{"globex", classReads, Limit{Rate: 50}},
		{"globex", classWrites, Limit{Rate: 10}},
		{"globex", classWatches, Limit{}},
		{"acme", classReads, Limit{Rate: 50}},
		{"acme", classWrites, Limit{}},
		{"acme", classWatches, Limit{Rate: 2, Burst: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.tenant+" "+tt.class.String(), func(t *testing.T) {
			require.Equal(t, tt.want, limits.For(tt.tenant, tt.class))
		})
	}
}
