package placement

// ledger is every placement the placer holds: which management cluster each cluster is on, and how many are on
// each. It is not safe for concurrent use: the Reconciler guards it with its mutex.
type ledger struct {
	clusters map[string]entry // by cluster id
	counts   map[string]int   // by management cluster name
	// seq numbers the entries in the order they were added, so that a prune drops only entries older than the list
	// of live clusters it compares them with.
	seq uint64
}

type entry struct {
	Placement
	seq uint64
}

func newLedger() *ledger {
	return &ledger{clusters: map[string]entry{}, counts: map[string]int{}}
}

// get returns the placement of a cluster.
func (l *ledger) get(cluster string) (Placement, bool) {
	e, ok := l.clusters[cluster]
	return e.Placement, ok
}

// add records a placement; a cluster already placed keeps its placement (a placement never changes).
func (l *ledger) add(cluster string, p Placement) {
	if _, ok := l.clusters[cluster]; ok {
		return
	}
	l.seq++
	l.clusters[cluster] = entry{Placement: p, seq: l.seq}
	l.counts[p.ManagementCluster]++
}

// remove frees a cluster's slot, if it has one.
func (l *ledger) remove(cluster string) {
	e, ok := l.clusters[cluster]
	if !ok {
		return
	}
	delete(l.clusters, cluster)
	l.counts[e.ManagementCluster]--
	if l.counts[e.ManagementCluster] <= 0 {
		delete(l.counts, e.ManagementCluster)
	}
}

// count returns how many clusters are placed on a management cluster.
func (l *ledger) count(mc string) int { return l.counts[mc] }

// mark returns the position of the last entry added, for prune.
func (l *ledger) mark() uint64 { return l.seq }

// prune drops the entries added up to mark whose cluster live does not have, and returns how many it dropped.
// Entries added after mark are kept: live was listed before they were placed, so it cannot know them.
func (l *ledger) prune(live map[string]bool, mark uint64) int {
	var gone []string
	for id, e := range l.clusters {
		if e.seq <= mark && !live[id] {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		l.remove(id)
	}
	return len(gone)
}

// len returns how many clusters are placed.
func (l *ledger) len() int { return len(l.clusters) }
