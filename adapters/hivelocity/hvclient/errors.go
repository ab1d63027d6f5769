package hvclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Every error a Client returns matches (errors.Is) exactly one of these.
var (
	// ErrNotFound: the device (or SSH key, product) does not exist, or is no longer visible to the account.
	ErrNotFound = errors.New("hivelocity: not found")
	// ErrRateLimited: the API answered 429, or the client is pausing every call until a rate-limit window
	// resets, or the request could not be sent within its caller's deadline because of the request budget.
	// RetryAfter says how long to wait.
	ErrRateLimited = errors.New("hivelocity: rate limited")
	// ErrUnauthorized: the API refused the API key (401, 403), or the key file cannot be read.
	ErrUnauthorized = errors.New("hivelocity: unauthorized")
	// ErrUnavailable: no answer, a timeout, a 5xx, or an answer that is not what the API documents.
	ErrUnavailable = errors.New("hivelocity: unavailable")
	// ErrRejected: the API refused the request as it stands (400, 409, 422…): a reload of a device that is
	// powered on or already reloading, a power action that does not apply, an OS the product does not offer.
	// Status tells which.
	ErrRejected = errors.New("hivelocity: rejected")
	// ErrLate: the request was not sent because its send deadline (see SendBy) passed while it waited for the
	// request budget. Nothing reached the API.
	ErrLate = errors.New("hivelocity: not sent before its deadline")
)

// Error is a failed call: the operation, the HTTP status (0 when there was no answer), the API's message, and
// for ErrRateLimited how long to wait. Unwrap gives its sentinel (for one built elsewhere, its status's).
type Error struct {
	Op         string // the official client's method, e.g. PutDeviceTagIdResource
	Status     int
	Message    string
	RetryAfter time.Duration
	kind       error
	cause      error
}

// sentinel is the error's sentinel: the one it was made with, or the one of its status.
func (e *Error) sentinel() error {
	switch {
	case e.kind != nil:
		return e.kind
	case e.Status != 0:
		return kindOf(e.Status)
	default:
		return ErrUnavailable
	}
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.sentinel().Error())
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.cause != nil {
		b.WriteString(": ")
		b.WriteString(e.cause.Error())
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter.Round(time.Second))
	}
	return b.String()
}

// Unwrap returns the sentinel and, for a call that got no answer, the transport's error.
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel(), e.cause}
	}
	return []error{e.sentinel()}
}

// StatusOf returns the HTTP status of a failed call, 0 if it got no answer or err is not a call's error.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// RetryAfter returns how long to wait before calling again after err: the rest of a rate-limit pause, or 0.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// kindOf maps an HTTP status to a sentinel.
func kindOf(status int) error {
	switch {
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrUnauthorized
	case status == http.StatusRequestTimeout || status >= 500:
		return ErrUnavailable
	case status >= 400:
		return ErrRejected
	default: // a 3xx the client cannot follow
		return ErrUnavailable
	}
}

// bodied is what the official client's GenericSwaggerError offers: the body of a failed call.
type bodied interface{ Body() []byte }

// classify turns the official client's result into an *Error, or nil for a success. resp may be nil when the
// request got no answer; err is then the transport's (or the throttle's) error.
func classify(ctx context.Context, op string, resp *http.Response, err error) error {
	if resp == nil {
		if err == nil {
			return nil
		}
		var e *Error
		if errors.As(err, &e) { // the throttle refused to send it
			c := *e
			c.Op = op
			return &c
		}
		if ctx.Err() != nil {
			return &Error{Op: op, kind: ErrUnavailable, cause: ctx.Err()}
		}
		return &Error{Op: op, kind: ErrUnavailable, cause: err}
	}
	if resp.StatusCode < 300 {
		if err != nil { // a 2xx the client could not decode
			return &Error{Op: op, Status: resp.StatusCode, kind: ErrUnavailable, cause: err}
		}
		return nil
	}
	e := &Error{Op: op, Status: resp.StatusCode, kind: kindOf(resp.StatusCode)}
	var b bodied
	if errors.As(err, &b) {
		e.Message = messageOf(b.Body())
	}
	return e
}

// messageOf returns the message of an error body: {"code", "message"}, the documented 429's {"code",
// "description"}, or the body's first line when it is not JSON (a proxy's page), capped.
func messageOf(body []byte) string {
	var v struct {
		Message     string `json:"message"`
		Description string `json:"description"`
		Error       string `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil {
		for _, m := range []string{v.Message, v.Description, v.Error} {
			if m != "" {
				return capped(m)
			}
		}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	return capped(line)
}

func capped(s string) string {
	const maxMessage = 300
	if len(s) > maxMessage {
		return s[:maxMessage] + "…"
	}
	return s
}
