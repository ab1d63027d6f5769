package capacity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsedAndFull(t *testing.T) {
	cp := ControlPlane{VCPU: DefaultControlPlaneVCPU, MemoryGiB: DefaultControlPlaneMemoryGiB}
	tests := []struct {
		name   string
		budget Budget
		n      int
		used   float64
		full   string
	}{
		{"empty", Budget{MaxHostedClusters: 4}, 0, 0, ""},
		{"by count", Budget{MaxHostedClusters: 4}, 1, 0.25, ""},
		{"the last slot", Budget{MaxHostedClusters: 4}, 4, 1, "full (4/4 hosted clusters)"},
		{"vCPU is the fullest budget", Budget{MaxHostedClusters: 10, VCPU: 10}, 1, 0.5, ""},
		{"no vCPU for one more", Budget{MaxHostedClusters: 10, VCPU: 12}, 2, 10.0 / 12, "full (10/12 vCPU)"},
		{"no memory for one more", Budget{MaxHostedClusters: 10, VCPU: 100, MemoryGiB: 36}, 2, 1, "full (36/36 GiB memory)"},
		{"over: more than 1", Budget{MaxHostedClusters: 1}, 2, 2, "full (2/1 hosted clusters)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.InDelta(t, tt.used, tt.budget.Used(tt.n, cp), 1e-9)
			require.Equal(t, tt.full, tt.budget.Full(tt.n, cp))
		})
	}
	require.Equal(t, Budget{}.Used(1, cp), Budget{MaxHostedClusters: 3}.Used(3, cp), "a budget of nothing is full")
	require.Equal(t, Budget{MaxHostedClusters: 3}.Used(1, cp), Budget{MaxHostedClusters: 6}.Used(2, cp), "equal shares compare equal")
}
