package conditions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Report is one adapter's status report about one resource, as it is posted.
type Report struct {
	Adapter            string
	ObservedGeneration int64
	ObservedTime       time.Time
	Conditions         []Reported
	Data               json.RawMessage // a JSON object, or empty
	Metadata           json.RawMessage // a JSON object, or empty
}

// Report limits and windows.
const (
	MaxDataBytes        = 64 << 10
	MaxMetadataBytes    = 16 << 10
	MaxConditions       = 32
	MaxConditionMessage = 4096
	MaxAdapterName      = 63
	// ObservedTimePast and ObservedTimeFuture bound observed_time around the receiver's clock: a report from
	// further back is stale by construction, one from the future comes from a broken clock.
	ObservedTimePast   = 30 * time.Minute
	ObservedTimeFuture = 5 * time.Minute
)

// Problem is one rule a report breaks, naming the offending field as the API's problem documents do.
type Problem struct {
	Field   string
	Message string
}

var (
	adapterName     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	conditionType   = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,127}$`)
	conditionReason = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)
)

// ValidAdapterName reports whether name may name an adapter: a DNS label of at most 63 characters, such as
// "version-resolver".
func ValidAdapterName(name string) bool {
	return len(name) <= MaxAdapterName && adapterName.MatchString(name)
}

// Validate checks a report on its own (not against the resource it is about) at time now and returns every rule
// it breaks, in field order; none means the API accepts it as far as its content goes.
func (rep *Report) Validate(now time.Time) []Problem {
	var problems []Problem
	add := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !ValidAdapterName(rep.Adapter) {
		add("adapter", "must be a DNS label of at most %d characters, e.g. version-resolver", MaxAdapterName)
	}
	if rep.ObservedGeneration < 1 {
		add("observed_generation", "must be at least 1")
	}
	switch {
	case rep.ObservedTime.IsZero():
		add("observed_time", "is required (RFC 3339)")
	case rep.ObservedTime.Before(now.Add(-ObservedTimePast)):
		add("observed_time", "is more than %s in the past", ObservedTimePast)
	case rep.ObservedTime.After(now.Add(ObservedTimeFuture)):
		add("observed_time", "is more than %s in the future: check the adapter's clock", ObservedTimeFuture)
	}
	if len(rep.Conditions) > MaxConditions {
		add("conditions", "at most %d conditions", MaxConditions)
	}
	seen := make(map[string]bool, len(rep.Conditions))
	for i, c := range rep.Conditions {
		field := fmt.Sprintf("conditions[%d]", i)
		if !conditionType.MatchString(c.Type) {
			add(field+".type", "must be CamelCase letters and digits, starting with a capital, e.g. %s", Available)
		} else if seen[c.Type] {
			add(field+".type", "%s appears more than once", c.Type)
		}
		seen[c.Type] = true
		if !c.Status.Valid() {
			add(field+".status", "must be %s, %s or %s", True, False, Unknown)
		}
		if c.Reason != "" && !conditionReason.MatchString(c.Reason) {
			add(field+".reason", "must be CamelCase letters, digits and '_', e.g. ImageResolved")
		}
		if len(c.Message) > MaxConditionMessage {
			add(field+".message", "must be at most %d bytes", MaxConditionMessage)
		}
	}
	if !seen[Available] {
		add("conditions", "must include an %s condition", Available)
	}
	checkObject := func(field string, raw json.RawMessage, limit int) {
		if len(raw) == 0 || string(raw) == "null" {
			return
		}
		if len(raw) > limit {
			add(field, "must be at most %d bytes of JSON", limit)
			return
		}
		// Validity and a leading '{' make an object, without building one: this runs on every status write.
		if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(raw) {
			add(field, "must be a JSON object")
		}
	}
	checkObject("data", rep.Data, MaxDataBytes)
	checkObject("metadata", rep.Metadata, MaxMetadataBytes)
	return problems
}
