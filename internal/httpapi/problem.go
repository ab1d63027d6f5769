package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// problemContentType is RFC 9457's media type.
const problemContentType = "application/problem+json"

// StatusClientClosedRequest is nginx's 499: the client went away before the answer. It is what the access log and
// the request metrics say for such a request, so that clients that hang up never count as server errors.
const StatusClientClosedRequest = 499

// statusOf maps each domain error code to its HTTP status: the one table that decides it.
var statusOf = map[resource.Code]int{
	resource.CodeMalformed:            http.StatusBadRequest,
	resource.CodeInvalid:              http.StatusBadRequest,
	resource.CodeBadSearch:            http.StatusBadRequest,
	resource.CodeBadListParam:         http.StatusBadRequest,
	resource.CodeInternalField:        http.StatusUnprocessableEntity,
	resource.CodeUnprocessable:        http.StatusUnprocessableEntity,
	resource.CodeImmutable:            http.StatusUnprocessableEntity,
	resource.CodeUnstorable:           http.StatusBadRequest,
	resource.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	resource.CodeMalformedID:          http.StatusBadRequest,
	resource.CodeNotFound:             http.StatusNotFound,
	resource.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	resource.CodeNameTaken:            http.StatusConflict,
	resource.CodeParentDeleting:       http.StatusConflict,
	resource.CodeDeleting:             http.StatusConflict,
	resource.CodeVersionMismatch:      http.StatusPreconditionFailed,
	resource.CodeInUse:                http.StatusConflict,
	resource.CodeTransition:           http.StatusConflict,
	resource.CodeDeletionProtected:    http.StatusConflict,
	resource.CodeLeaseLost:            http.StatusConflict,
	resource.CodeQuotaExceeded:        http.StatusUnprocessableEntity,
	resource.CodeStatusStale:          http.StatusConflict,
	resource.CodeExpired:              http.StatusGone,
	resource.CodeUnauthenticated:      http.StatusUnauthorized,
	resource.CodeForbidden:            http.StatusForbidden,
	resource.CodeTooLarge:             http.StatusRequestEntityTooLarge,
	resource.CodeRateLimited:          http.StatusTooManyRequests,
	resource.CodeRequestTimeout:       http.StatusRequestTimeout,
	resource.CodeTooManyConcurrent:    http.StatusTooManyRequests,
	resource.CodeClientClosed:         StatusClientClosedRequest,
	resource.CodeUnavailable:          http.StatusServiceUnavailable,
	resource.CodeInternal:             http.StatusInternalServerError,
}

// writeError answers err as problem+json. Anything that is not a *resource.Error is logged and answered as a 500
// that carries only the request id, so internals never leak to clients.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var e *resource.Error
	if !errors.As(err, &e) && isDataException(err) {
		// SQLSTATE class 22 is the database refusing a value: bad input that got past the checks, never a fault of
		// the server's. It is answered as such, and the checks that should have caught it are the bug to fix.
		log.WarnContext(r.Context(), "the database refused a value the API let through", "error", err)
		e = &resource.Error{Code: resource.CodeUnstorable, Message: "a value in the request cannot be stored"}
	}
	switch {
	case e != nil:
	case r.Context().Err() != nil:
		// The client went away and the work it started was cancelled: nobody reads the answer, and it is no
		// fault of the server's.
		log.DebugContext(r.Context(), "the client went away", "error", err)
		e = &resource.Error{Code: resource.CodeClientClosed, Message: "the client closed the request"}
	case isTimedOut(err):
		log.WarnContext(r.Context(), "a statement hit the database's statement or lock timeout", "error", err)
		e = &resource.Error{Code: resource.CodeUnavailable, Message: "the database did not answer in time (statement or lock timeout); retry later"}
	case isUnavailable(err):
		log.ErrorContext(r.Context(), "database unavailable", "error", err)
		e = &resource.Error{Code: resource.CodeUnavailable, Message: "the database is unavailable; retry later"}
	default:
		log.ErrorContext(r.Context(), "internal error", "error", err)
		e = &resource.Error{Code: resource.CodeInternal, Message: "an internal error occurred; quote the request id when reporting it"}
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	title := http.StatusText(status)
	if status == StatusClientClosedRequest {
		title = "Client Closed Request"
	}
	p := api.Problem{
		Type:      "urn:hyperfleet:problem:" + string(e.Code),
		Title:     title,
		Status:    status,
		Code:      string(e.Code),
		Detail:    &e.Message,
		Instance:  ptr(r.URL.Path),
		RequestId: ptr(requestID(r.Context())),
	}
	if len(e.Fields) > 0 {
		fields := make([]api.FieldError, len(e.Fields))
		for i, f := range e.Fields {
			fields[i] = api.FieldError{Field: f.Field, Message: f.Message}
		}
		p.Errors = &fields
	}
	if e.Code == resource.CodeUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if e.Code == resource.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hyperfleet"`)
	}
	w.Header().Set("Content-Type", problemContentType)
	w.WriteHeader(status)
	logEncodeError(r, log, json.NewEncoder(w).Encode(p))
}

func ptr[T any](v T) *T { return &v }
