package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// setIdentity records the authenticated caller for the request log.
func setIdentity(ctx context.Context, name string) {
	if p, ok := ctx.Value(identityKey{}).(*string); ok {
		*p = name
	}
}

type requestIDKey struct{}

// identityKey holds a *string that authentication fills in, so that the outer logging middleware, which runs
// before the caller is known, can still log who it was.
type identityKey struct{}

// requestIDHeader is read from clients (so a trace can span systems) and always answered.
const requestIDHeader = "X-Request-Id"

var safeRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// statusRecorder remembers the status a handler wrote, for logs and metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (a watch flushes and extends its write deadline).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// observe gives each request an id, recovers panics as 500 problems, and logs and measures the outcome.
func (s *Handler) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(requestIDHeader)
		if !safeRequestID.MatchString(id) {
			id = newRequestID()
		}
		w.Header().Set(requestIDHeader, id)
		identity := "anonymous"
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		r = r.WithContext(context.WithValue(ctx, identityKey{}, &identity))
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			p := recover()
			// An aborted handler has sent part of its answer and wants the connection cut: it is counted and
			// logged like any request, then net/http does the cutting.
			aborted := false
			if p != nil {
				if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					aborted = true
				} else {
					writeError(rec, r, s.log, fmt.Errorf("panic: %v", p))
				}
			}
			if aborted {
				defer panic(p)
			}
			route := routeTemplate(r)
			elapsed := time.Since(start)
			s.metrics.observe(r.Method, route, rec.status, elapsed)
			level := slog.LevelInfo
			attrs := []slog.Attr{slog.String("request_id", id), slog.String("method", knownMethod(r.Method)),
				slog.String("route", route), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
				slog.String("identity", identity), slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000)}
			switch {
			case rec.status == StatusClientClosedRequest:
				level = slog.LevelDebug
			case rec.status >= 500:
				level = slog.LevelError
			case aborted:
				level = slog.LevelWarn
				attrs = append(attrs, slog.Bool("aborted", true))
			}
			s.log.LogAttrs(r.Context(), level, "request", attrs...)
		}()
		next.ServeHTTP(rec, r)
	})
}

func routeTemplate(r *http.Request) string {
	if m := mux.CurrentRoute(r); m != nil {
		if t, err := m.GetPathTemplate(); err == nil {
			return t
		}
	}
	return "unmatched"
}

// limitBody caps request bodies; handlers see *http.MaxBytesError and answer 413.
func (s *Handler) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(w, r, s.log, tooLarge(s.cfg.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

func tooLarge(limit int64) error {
	return resource.Errorf(resource.CodeTooLarge, "the request body is over the limit of %d bytes", limit)
}

// isDataException reports whether the database refused a value (SQLSTATE class 22: invalid text, numeric out of
// range, untranslatable character, …).
func isDataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22"
}

// isTimedOut reports the database cancelling a statement for statement_timeout (57014) or lock_timeout (55P03). A
// client's own cancellation also shows as 57014, which writeError has told apart by then.
func isTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "57014" || pgErr.Code == "55P03")
}

// isUnavailable tells a database outage (connection refused, reset, admin shutdown) from a bug.
func isUnavailable(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01–57P03: admin/crash shutdown, cannot connect now.
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	return pgconn.SafeToRetry(err)
}
