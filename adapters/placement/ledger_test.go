package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLedger(t *testing.T) {
	a, b := Placement{ManagementCluster: "mc-a"}, Placement{ManagementCluster: "mc-b"}
	l := newLedger()
	l.add("c1", a)
	l.add("c2", a)
	l.add("c1", b) // a placement never changes
	require.Equal(t, map[string]int{"mc-a": 2}, l.counts)
	got, ok := l.get("c1")
	require.True(t, ok)
	require.Equal(t, a, got)

	mark := l.mark()
	l.add("c3", b)
	// c2 and c3 are not in the list; c3 was added after it was taken.
	require.Equal(t, 1, l.prune(map[string]bool{"c1": true}, mark))
	require.Equal(t, map[string]int{"mc-a": 1, "mc-b": 1}, l.counts)

	l.remove("c1")
	l.remove("c1")
	l.remove("unknown")
	require.Equal(t, map[string]int{"mc-b": 1}, l.counts, "an emptied management cluster leaves no count behind")
	require.Equal(t, 1, l.len())
	_, ok = l.get("c1")
	require.False(t, ok)
}
