package resource

import (
	"errors"
	"fmt"
)

// Code classifies an Error. Codes are stable: clients match on them, so never renumber one.
// The HTTP edge maps each code to a status and an RFC 9457 problem (see httpapi).
type Code string

// The error codes, one per distinct failure a client can act on.
const (
	CodeMalformed            Code = "HYPERFLEET-VAL-001" // body is not JSON, has unknown fields or wrong types
	CodeInvalid              Code = "HYPERFLEET-VAL-002" // schema or field rule violated
	CodeBadSearch            Code = "HYPERFLEET-VAL-003" // search expression does not parse or names an unknown field
	CodeBadListParam         Code = "HYPERFLEET-VAL-004" // page, size, order, fields out of range or unknown
	CodeInternalField        Code = "HYPERFLEET-VAL-005" // a non-admin wrote an internal spec field
	CodeUnprocessable        Code = "HYPERFLEET-VAL-006" // well-formed but not acceptable in the resource's state
	CodeImmutable            Code = "HYPERFLEET-VAL-007" // a spec field that cannot change after create was changed
	CodeUnstorable           Code = "HYPERFLEET-VAL-008" // a JSON value that cannot be stored (NUL, bad UTF-8, huge numbers)
	CodeUnsupportedMediaType Code = "HYPERFLEET-VAL-009" // a body in a media type the operation does not take
	CodeMalformedID          Code = "HYPERFLEET-VAL-010" // an id in the path is not a UUID
	CodeNotFound             Code = "HYPERFLEET-NTF-001"
	CodeMethodNotAllowed     Code = "HYPERFLEET-NTF-002"
	CodeNameTaken            Code = "HYPERFLEET-CNF-001"
	CodeParentDeleting       Code = "HYPERFLEET-CNF-002"
	CodeDeleting             Code = "HYPERFLEET-CNF-003" // the resource itself is being deleted
	CodeVersionMismatch      Code = "HYPERFLEET-CNF-004" // If-Match named another version (ETag)
	CodeInUse                Code = "HYPERFLEET-CNF-005" // live resources of another kind name this one
	CodeTransition           Code = "HYPERFLEET-CNF-006" // a spec change the kind's rules refuse from the stored spec (a minor going back)
	CodeDeletionProtected    Code = "HYPERFLEET-CNF-007" // deletion_protection is on: clear it with a PATCH first
	CodeLeaseLost            Code = "HYPERFLEET-CNF-008" // a report made under a shard lease the reporting replica no longer holds (fencing)
	CodeQuotaExceeded        Code = "HYPERFLEET-QTA-001" // the tenant's quota would be exceeded
	CodeStatusStale          Code = "HYPERFLEET-STS-001"
	CodeExpired              Code = "HYPERFLEET-WAT-001" // a watch position older than the retained change feed
	CodeUnauthenticated      Code = "HYPERFLEET-AUT-001"
	CodeForbidden            Code = "HYPERFLEET-AUZ-001"
	CodeTooLarge             Code = "HYPERFLEET-LMT-001"
	CodeRateLimited          Code = "HYPERFLEET-LMT-002"
	CodeRequestTimeout       Code = "HYPERFLEET-LMT-003" // the body did not arrive within the server's read timeout
	CodeTooManyConcurrent    Code = "HYPERFLEET-LMT-004" // too many open watches, or lists and searches at once; retry later
	CodeClientClosed         Code = "HYPERFLEET-CLI-001" // the client went away before the answer; nobody reads it
	CodeUnavailable          Code = "HYPERFLEET-INT-002" // a dependency (the database) is down; retry later
	CodeInternal             Code = "HYPERFLEET-INT-001"
)

// FieldError names one offending field of a request.
type FieldError struct {
	Field   string
	Message string
}

// Error is the one error type of the domain. Message is safe to show to the client; Fields lists
// per-field problems. Anything that is not an *Error reaching the HTTP edge is an internal error.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s (%s: %s …)", e.Code, e.Message, e.Fields[0].Field, e.Fields[0].Message)
}

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// QuotaExceeded is the refusal of amount more of a tenant's quota name, of which it uses used out of limit.
func QuotaExceeded(name, tenant string, used, amount, limit int64) error {
	return &Error{Code: CodeQuotaExceeded,
		Message: fmt.Sprintf("quota %s of tenant %q exceeded: %d in use of %d, and this needs %d more", name, tenant, used, limit, amount),
		Fields:  []FieldError{{Field: "quota." + name, Message: fmt.Sprintf("%d in use, limit %d, requested %d", used, limit, amount)}}}
}
