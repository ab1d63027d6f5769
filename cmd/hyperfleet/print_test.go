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

func TestPrinterFormats(t *testing.T) {
	tests := []struct {
		output  string
		format  string
		columns []api.Column
		wantErr string
	}{
		{output: "table", format: formatTable},
		{output: "jsonpath={.items[*].name}", format: formatJSONPath},
		{output: "go-template={{range .items}}{{.name}}{{end}}", format: formatGoTemplate},
		{output: "custom-columns=NAME:.name,REPLICAS:{.spec.replicas}", format: formatCustomColumns,
			columns: []api.Column{{Header: "NAME", JSONPath: "{.name}"}, {Header: "REPLICAS", JSONPath: "{.spec.replicas}"}}},
		{output: "jsonpath={.items[", wantErr: "-o jsonpath="},
		{output: "go-template={{.name", wantErr: "-o go-template="},
		{output: "custom-columns=NAME", wantErr: "HEADER:.json.path"},
		{output: "custom-columns=NAME:.items[", wantErr: "column NAME"},
	}
	for _, tc := range tests {
		t.Run(tc.output, func(t *testing.T) {
			p, err := newPrinter(tc.output, false)
			if tc.wantErr != "" {
				var uerr *usageError
				require.ErrorAs(t, err, &uerr)
				require.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.format, p.format)
			require.Equal(t, tc.columns, p.columns)
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
