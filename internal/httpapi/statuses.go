package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// reportBody is an adapter's status report on the wire.
type reportBody struct {
	Adapter            string              `json:"adapter"`
	ObservedGeneration int64               `json:"observed_generation"`
	ObservedTime       time.Time           `json:"observed_time"`
	Conditions         []reportedCondition `json:"conditions"`
	Data               json.RawMessage     `json:"data"`
	Metadata           json.RawMessage     `json:"metadata"`
}

type reportedCondition struct {
	Type    string            `json:"type"`
	Status  conditions.Status `json:"status"`
	Reason  string            `json:"reason,omitempty"`
	Message string            `json:"message,omitempty"`
}

type statusJSONOut struct {
	Adapter            string                 `json:"adapter"`
	ObservedGeneration int64                  `json:"observed_generation"`
	ObservedTime       time.Time              `json:"observed_time"`
	Conditions         []conditions.Condition `json:"conditions"`
	Data               json.RawMessage        `json:"data"`
	Metadata           json.RawMessage        `json:"metadata"`
	CreatedTime        time.Time              `json:"created_time"`
	LastReportTime     time.Time              `json:"last_report_time"`
}

func presentStatus(st *resource.AdapterStatus) statusJSONOut {
	out := statusJSONOut{
		Adapter: st.Adapter, ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Conditions: st.Conditions,
		Data: st.Data, Metadata: st.Metadata, CreatedTime: st.CreatedTime, LastReportTime: st.LastReportTime,
	}
	if out.Conditions == nil {
		out.Conditions = []conditions.Condition{}
	}
	return out
}

func (k *kindHandler) putStatus(w http.ResponseWriter, r *http.Request) {
	var body reportBody
	if err := decodeReport(r, &body); err != nil {
		k.fail(w, r, err)
		return
	}
	if err := k.s.authorize(r, auth.ActionWriteStatus, body.Adapter); err != nil {
		k.fail(w, r, err)
		return
	}
	if err := k.s.authorizeReportKind(r, k.d); err != nil {
		k.fail(w, r, err)
		return
	}
	rep := conditions.Report{Adapter: body.Adapter, ObservedGeneration: body.ObservedGeneration, ObservedTime: body.ObservedTime,
		Data: body.Data, Metadata: body.Metadata, Conditions: make([]conditions.Reported, len(body.Conditions))}
	for i, c := range body.Conditions {
		rep.Conditions[i] = conditions.Reported{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	ids := idsOf(r)
	st, created, err := k.s.svc.PutStatus(r.Context(), k.d, ids.parent, ids.id, rep)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	k.s.respond(w, r, status, presentStatus(st))
}

func (k *kindHandler) listStatuses(w http.ResponseWriter, r *http.Request) {
	ids := idsOf(r)
	all, err := k.s.svc.ListStatuses(r.Context(), k.d, ids.parent, ids.id)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	// A resource has one report per adapter, a handful: the list is never paged, but keeps the list envelope.
	out := listJSON{Kind: "AdapterStatusList", Page: 1, Size: len(all), Total: int64(len(all)), Items: make([]any, len(all))}
	for i := range all {
		out.Items[i] = presentStatus(&all[i])
	}
	k.s.respond(w, r, http.StatusOK, out)
}

func (k *kindHandler) forceDelete(w http.ResponseWriter, r *http.Request) {
	ids := idsOf(r)
	res, err := k.s.svc.ForceDelete(r.Context(), k.d, ids.parent, ids.id)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	k.s.log.WarnContext(r.Context(), "audit: force-deleted", "kind", k.d.Kind, "id", res.ID, "name", res.Name,
		"identity", resource.CallerFrom(r.Context()).Name, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}
