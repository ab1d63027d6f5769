package cincinnatisim

import (
	"fmt"
	"slices"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
)

// index returns the index of the node of version, or -1.
func (g *Graph) index(version string) int {
	return slices.IndexFunc(g.Nodes, func(n Node) bool { return n.Version == version })
}

// dropConditional removes the conditional edges drop selects, and the entries left without edges.
func (g *Graph) dropConditional(drop func(Edge) bool) (dropped bool) {
	out := g.ConditionalEdges[:0]
	for _, c := range g.ConditionalEdges {
		n := len(c.Edges)
		c.Edges = slices.DeleteFunc(c.Edges, drop)
		dropped = dropped || len(c.Edges) < n
		if len(c.Edges) > 0 {
			out = append(out, c)
		}
	}
	g.ConditionalEdges = out
	return dropped
}

// AddConditionalEdge makes the update from → to on channel and arch conditional on risks, as Cincinnati serves an
// edge that graph-data blocks with matching rules: the plain edge goes, and the edge joins the conditionalEdges entry
// with the same risks (a new entry if none has them). An edge that was already conditional takes the new risks. It
// returns an error wrapping ErrInvalidRelease if a release is missing or a risk has no name, or the graph does not
// exist.
func (s *Simulator) AddConditionalEdge(channel, arch, from, to string, risks []Risk) error {
	if len(risks) == 0 {
		return fmt.Errorf("%w: a conditional edge needs at least one risk", ErrInvalidRelease)
	}
	for _, r := range risks {
		if r.Name == "" {
			return fmt.Errorf("%w: a risk needs a name", ErrInvalidRelease)
		}
		if len(r.MatchingRules) == 0 {
			return fmt.Errorf("%w: risk %s needs matching rules (type %s, or %s with a query)", ErrInvalidRelease, r.Name,
				cincinnati.RuleAlways, cincinnati.RulePromQL)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.graphs[graphKey{channel, arch}]
	if g == nil {
		return fmt.Errorf("%w: no graph for %s/%s", ErrInvalidRelease, channel, arch)
	}
	fi, ti := g.index(from), g.index(to)
	if fi < 0 || ti < 0 {
		return fmt.Errorf("%w: %s -> %s: both releases must be in %s/%s", ErrInvalidRelease, from, to, channel, arch)
	}
	edge := Edge{From: from, To: to}
	g.Edges = slices.DeleteFunc(g.Edges, func(e [2]int) bool { return e == [2]int{fi, ti} })
	g.dropConditional(func(e Edge) bool { return e == edge })
	risks = cloneRisks(risks)
	for i := range g.ConditionalEdges {
		if sameRisks(g.ConditionalEdges[i].Risks, risks) {
			g.ConditionalEdges[i].Edges = append(g.ConditionalEdges[i].Edges, edge)
			return nil
		}
	}
	g.ConditionalEdges = append(g.ConditionalEdges, ConditionalEdge{Edges: []Edge{edge}, Risks: risks})
	return nil
}

// RemoveEdge removes the update from → to on channel and arch, plain or conditional, leaving both releases: what
// Cincinnati serves once graph-data blocks an edge outright. It reports whether there was such an edge.
func (s *Simulator) RemoveEdge(channel, arch, from, to string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.graphs[graphKey{channel, arch}]
	if g == nil {
		return false
	}
	fi, ti := g.index(from), g.index(to)
	if fi < 0 || ti < 0 {
		return false
	}
	n := len(g.Edges)
	g.Edges = slices.DeleteFunc(g.Edges, func(e [2]int) bool { return e == [2]int{fi, ti} })
	conditional := g.dropConditional(func(e Edge) bool { return e == Edge{From: from, To: to} })
	return len(g.Edges) < n || conditional
}

// sameRisks reports whether a and b are the same risks in the same order.
func sameRisks(a, b []Risk) bool {
	return slices.EqualFunc(a, b, func(x, y Risk) bool {
		return x.Name == y.Name && x.URL == y.URL && x.Message == y.Message &&
			slices.EqualFunc(x.MatchingRules, y.MatchingRules, func(p, q cincinnati.MatchingRule) bool {
				return p.Type == q.Type && (p.PromQL == nil) == (q.PromQL == nil) && (p.PromQL == nil || *p.PromQL == *q.PromQL)
			})
	})
}

// cloneRisks deep-copies risks, never returning nil so that the JSON says [].
func cloneRisks(risks []Risk) []Risk {
	out := make([]Risk, len(risks))
	for i, r := range risks {
		r.MatchingRules = slices.Clone(r.MatchingRules)
		for j, m := range r.MatchingRules {
			if m.PromQL != nil {
				q := *m.PromQL
				r.MatchingRules[j].PromQL = &q
			}
		}
		out[i] = r
	}
	return out
}
