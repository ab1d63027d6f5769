package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

const defaultHistoryPage = 100

// historyEntryJSON is the openapi HistoryEntry.
type historyEntryJSON struct {
	Seq        int64               `json:"seq"`
	Time       time.Time           `json:"time"`
	Actor      string              `json:"actor"`
	Action     string              `json:"action"`
	Generation int64               `json:"generation"`
	Changes    json.RawMessage     `json:"changes,omitempty"`
	PhaseFrom  conditions.Phase    `json:"phase_from,omitempty"`
	PhaseTo    conditions.Phase    `json:"phase_to,omitempty"`
	Reports    []historyReportJSON `json:"reports,omitempty"`
}

// historyReportJSON is the openapi HistoryReport.
type historyReportJSON struct {
	Adapter            string                 `json:"adapter"`
	ObservedGeneration int64                  `json:"observed_generation"`
	Conditions         []conditions.Condition `json:"conditions"`
}

// historyListJSON is the openapi HistoryList.
type historyListJSON struct {
	Kind  string             `json:"kind"`
	Items []historyEntryJSON `json:"items"`
	// Next is the after of the next page; absent on the last.
	Next string `json:"next,omitempty"`
}

// history answers GET {item}/history: a page of the resource's history, oldest first, after the cursor `after`
// (a sequence number) with at most `size` entries. It answers for a resource that is gone, too.
func (k *kindHandler) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			k.fail(w, r, badParam("after", "must be the next of a history page: a whole number from 0"))
			return
		}
		after = n
	}
	size := defaultHistoryPage
	if v := q.Get("size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > resource.MaxHistoryPage {
			k.fail(w, r, badParam("size", fmt.Sprintf("must be a whole number from 1 to %d", resource.MaxHistoryPage)))
			return
		}
		size = n
	}
	ids := idsOf(r)
	entries, err := k.s.svc.History(r.Context(), k.d, ids.parent, ids.id, after, size)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	public := !k.s.seesInternal(r) && k.d.Spec.HasInternal()
	out := historyListJSON{Kind: "HistoryList", Items: make([]historyEntryJSON, len(entries))}
	for i := range entries {
		e := &entries[i]
		item := historyEntryJSON{Seq: e.Seq, Time: e.Time, Actor: e.Actor, Action: string(e.Action), Generation: e.Generation,
			Changes: e.Changes, PhaseFrom: e.PhaseFrom, PhaseTo: e.PhaseTo}
		if public && len(e.Changes) > 0 {
			if item.Changes, err = k.publicChanges(e.Changes); err != nil {
				k.fail(w, r, err)
				return
			}
		}
		for _, rep := range e.Reports {
			conds := rep.Conditions
			if conds == nil {
				conds = []conditions.Condition{}
			}
			item.Reports = append(item.Reports, historyReportJSON{Adapter: rep.Adapter, ObservedGeneration: rep.ObservedGeneration, Conditions: conds})
		}
		out.Items[i] = item
	}
	if len(entries) == size {
		out.Next = strconv.FormatInt(entries[len(entries)-1].Seq, 10)
	}
	k.s.respond(w, r, http.StatusOK, out)
}

// publicChanges removes the internal spec fields from an entry's changes, for a caller who may not see them (as
// publicSpec does for the resource): a history must not show what the resource hides.
func (k *kindHandler) publicChanges(raw json.RawMessage) (json.RawMessage, error) {
	var changes map[string]any
	if err := json.Unmarshal(raw, &changes); err != nil {
		return nil, fmt.Errorf("decode a history entry's changes: %w", err)
	}
	spec, ok := changes["spec"].(map[string]any)
	if !ok || !k.d.Spec.StripInternal(spec) {
		return raw, nil
	}
	out, err := json.Marshal(changes)
	if err != nil {
		return nil, fmt.Errorf("encode a history entry's public changes: %w", err)
	}
	return out, nil
}
