package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// maxMessage bounds a condition message: an error chain can quote a whole response body.
const maxMessage = 1024

// buildReport turns one reconcile's outcome into the status report to post. It always yields Available,
// Applied and Health (and Finalized when finalizing); the reconciler's own conditions follow, minus any that
// would repeat a type.
func buildReport(adapter string, obj *Object, out Outcome, err error, finalizing bool, now time.Time, metadata map[string]any) api.AdapterStatusReport {
	available := out.Available
	available.Type = conditions.Available
	if available.Status == "" {
		if err != nil {
			available.Status, available.Reason, available.Message = conditions.False, errorReason(err), err.Error()
		} else {
			available.Status, available.Reason = conditions.Unknown, conditions.ReasonNotReported
		}
	}
	okReason := conditions.ReasonReconciled
	if finalizing {
		okReason = conditions.ReasonFinalizing
		if out.Finalized {
			okReason = conditions.ReasonFinalized
		}
	}
	applied := conditions.Reported{Type: conditions.Applied, Status: conditions.True, Reason: okReason}
	health := conditions.Reported{Type: conditions.Health, Status: conditions.True, Reason: okReason}
	if err != nil {
		applied = conditions.Reported{Type: conditions.Applied, Status: conditions.False, Reason: errorReason(err), Message: err.Error()}
		health = conditions.Reported{Type: conditions.Health, Status: conditions.False, Reason: errorReason(err), Message: err.Error()}
	}
	conds := []conditions.Reported{available, applied, health}
	if finalizing {
		fin := conditions.Reported{Type: conditions.Finalized, Status: conditions.False, Reason: conditions.ReasonFinalizing}
		if out.Finalized && err == nil {
			fin = conditions.Reported{Type: conditions.Finalized, Status: conditions.True, Reason: conditions.ReasonFinalized}
		}
		conds = append(conds, fin)
	}
	return assemble(adapter, obj, appendNew(conds, out.Conditions), out.Data, metadata, now)
}

// appendNew appends to conds the conditions of more whose type is neither empty nor already there.
func appendNew(conds, more []conditions.Reported) []conditions.Reported {
	seen := map[string]bool{}
	for _, c := range conds {
		seen[c.Type] = true
	}
	for _, c := range more {
		if c.Type != "" && !seen[c.Type] {
			seen[c.Type] = true
			conds = append(conds, c)
		}
	}
	return conds
}

// assemble turns conditions and data into the report to post about obj at its generation.
func assemble(adapter string, obj *Object, conds []conditions.Reported, data, metadata map[string]any, now time.Time) api.AdapterStatusReport {
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
	if data != nil {
		report.Data = &data
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
	for s != "" && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// checked returns report if the API will accept it. Otherwise it returns the runtime's own minimal report, which
// says why, and the problem: a reconciler's mistake (a lowercase condition type, a reason with a '-', data over
// 64 KiB) must not leave the adapter silent about the resource. The rules are the API's own (package conditions).
func checked(report api.AdapterStatusReport, now time.Time) (api.AdapterStatusReport, error) {
	rep := conditions.Report{Adapter: report.Adapter, ObservedGeneration: report.ObservedGeneration, ObservedTime: report.ObservedTime}
	for _, c := range report.Conditions {
		rep.Conditions = append(rep.Conditions, conditions.Reported{Type: c.Type, Status: conditions.Status(c.Status),
			Reason: deref(c.Reason), Message: deref(c.Message)})
	}
	var encodeErr error
	if report.Data != nil {
		var err error
		if rep.Data, err = json.Marshal(*report.Data); err != nil {
			rep.Data, encodeErr = []byte("not JSON"), fmt.Errorf("data: %w", err)
		}
	}
	if report.Metadata != nil {
		var err error
		if rep.Metadata, err = json.Marshal(*report.Metadata); err != nil {
			rep.Metadata, encodeErr = []byte("not JSON"), errors.Join(encodeErr, fmt.Errorf("metadata: %w", err))
		}
	}
	problems := rep.Validate(now)
	if len(problems) == 0 && encodeErr == nil {
		return report, nil
	}
	parts := make([]string, 0, len(problems)+1)
	if encodeErr != nil {
		parts = append(parts, encodeErr.Error())
	}
	for _, p := range problems {
		parts = append(parts, p.Field+": "+p.Message)
	}
	problem := "the reconciler's report was refused: " + strings.Join(parts, "; ")
	msg := truncate(problem, maxMessage)
	reason := conditions.ReasonInvalidReport
	minimal := report
	minimal.Data = nil
	minimal.Conditions = []api.ReportedCondition{
		{Type: conditions.Available, Status: api.ReportedConditionStatusUnknown, Reason: &reason, Message: &msg},
		{Type: conditions.Applied, Status: api.ReportedConditionStatusFalse, Reason: &reason, Message: &msg},
		{Type: conditions.Health, Status: api.ReportedConditionStatusFalse, Reason: &reason, Message: &msg},
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
