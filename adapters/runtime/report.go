package adapter

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/resource"
)

// maxMessage bounds a condition message: an error chain can quote a whole response body.
const maxMessage = 1024

// buildReport turns one reconcile's outcome into the status report to post. It always yields Available,
// Applied and Health (and Finalized when finalizing); the reconciler's own conditions follow, minus any that
// would repeat a type.
func buildReport(adapter string, obj *Object, out Outcome, err error, finalizing bool, now time.Time, metadata map[string]any) api.AdapterStatusReport {
	available := out.Available
	available.Type = ConditionAvailable
	if available.Status == "" {
		if err != nil {
			available.Status, available.Reason, available.Message = False, errorReason(err), err.Error()
		} else {
			available.Status, available.Reason = Unknown, ReasonNotReported
		}
	}
	okReason := ReasonReconciled
	if finalizing {
		okReason = ReasonFinalizing
		if out.Finalized {
			okReason = ReasonFinalized
		}
	}
	applied := Condition{Type: ConditionApplied, Status: True, Reason: okReason}
	health := Condition{Type: ConditionHealth, Status: True, Reason: okReason}
	if err != nil {
		applied = Condition{Type: ConditionApplied, Status: False, Reason: errorReason(err), Message: err.Error()}
		health = Condition{Type: ConditionHealth, Status: False, Reason: errorReason(err), Message: err.Error()}
	}
	conds := []Condition{available, applied, health}
	if finalizing {
		fin := Condition{Type: ConditionFinalized, Status: False, Reason: ReasonFinalizing}
		if out.Finalized && err == nil {
			fin = Condition{Type: ConditionFinalized, Status: True, Reason: ReasonFinalized}
		}
		conds = append(conds, fin)
	}
	seen := map[string]bool{}
	for _, c := range conds {
		seen[c.Type] = true
	}
	for _, c := range out.Conditions {
		if c.Type != "" && !seen[c.Type] {
			seen[c.Type] = true
			conds = append(conds, c)
		}
	}
	report := api.AdapterStatusReport{
		Adapter:            adapter,
		ObservedGeneration: obj.Generation,
		ObservedTime:       now.UTC(),
		Conditions:         make([]api.ReportedCondition, len(conds)),
	}
	for i, c := range conds {
		rc := api.ReportedCondition{Type: c.Type, Status: api.ReportedConditionStatus(c.Status)}
		if c.Status == "" {
			rc.Status = api.ReportedConditionStatusUnknown
		}
		if c.Reason != "" {
			rc.Reason = &c.Reason
		}
		if c.Message != "" {
			msg := truncate(c.Message, maxMessage)
			rc.Message = &msg
		}
		report.Conditions[i] = rc
	}
	if out.Data != nil {
		report.Data = &out.Data
	}
	if metadata != nil {
		report.Metadata = &metadata
	}
	return report
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "�")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	// Cut back to the start of the last (now partial) character.
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// ReasonInvalidReport is the reason of a report the runtime sent instead of one the API would have refused.
const ReasonInvalidReport = "InvalidReport"

// checked returns report if the API will accept it. Otherwise it returns the runtime's own minimal report, which
// says why, and the problem: a reconciler's mistake (a lowercase condition type, a reason with a '-', data over
// 64 KiB) must not leave the adapter silent about the resource.
func checked(report api.AdapterStatusReport, now time.Time) (api.AdapterStatusReport, error) {
	rep := resource.StatusReport{Adapter: report.Adapter, ObservedGeneration: report.ObservedGeneration, ObservedTime: report.ObservedTime}
	for _, c := range report.Conditions {
		rep.Conditions = append(rep.Conditions, resource.ReportedCondition{Type: c.Type, Status: resource.ConditionStatus(c.Status),
			Reason: deref(c.Reason), Message: deref(c.Message)})
	}
	var err error
	if report.Data != nil {
		if rep.Data, err = json.Marshal(*report.Data); err != nil {
			rep.Data = []byte("not JSON")
		}
	}
	if report.Metadata != nil {
		rep.Metadata, _ = json.Marshal(*report.Metadata)
	}
	invalid := resource.ValidateReport(rep, now)
	if invalid == nil && err == nil {
		return report, nil
	}
	problem := errors.Join(err, invalid).Error()
	var rerr *resource.Error
	if errors.As(invalid, &rerr) {
		var parts []string
		for _, f := range rerr.Fields {
			parts = append(parts, f.Field+": "+f.Message)
		}
		problem = "the reconciler's report was refused: " + strings.Join(parts, "; ")
	}
	msg := truncate(problem, maxMessage)
	reason := ReasonInvalidReport
	minimal := report
	minimal.Data = nil
	minimal.Conditions = []api.ReportedCondition{
		{Type: ConditionAvailable, Status: api.ReportedConditionStatusUnknown, Reason: &reason, Message: &msg},
		{Type: ConditionApplied, Status: api.ReportedConditionStatusFalse, Reason: &reason, Message: &msg},
		{Type: ConditionHealth, Status: api.ReportedConditionStatusFalse, Reason: &reason, Message: &msg},
	}
	return minimal, errors.New(problem)
}

// changed reports whether any condition's status or reason differs from the last report's, so that the log
// says when something happened rather than every heartbeat.
func changed(last *Report, conds []api.ReportedCondition) bool {
	if last == nil {
		return true
	}
	for _, c := range conds {
		prev := last.Condition(c.Type)
		if prev == nil || string(prev.Status) != string(c.Status) || prev.Reason != deref(c.Reason) {
			return true
		}
	}
	return false
}
