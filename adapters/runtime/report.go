package adapter

import (
	"time"
	"unicode/utf8"

	"github.com/hyperfleet/hyperfleet/pkg/api"
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
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
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

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
