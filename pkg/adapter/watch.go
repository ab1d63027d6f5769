package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// watchExpired is the problem code of a watch position older than the events the API keeps.
const watchExpired = "HYPERFLEET-WAT-001"

// relistError ends a watch that must list again before it watches on: its position expired, or an event could not
// be handled (listing finds whatever the event was about).
type relistError struct {
	reason string // relistExpired or relistFailed
	err    error
}

func (e *relistError) Error() string { return e.err.Error() }
func (e *relistError) Unwrap() error { return e.err }

// watchSource follows one feed through the API's watch (SourceWatch): it lists, watches from the list's position
// with the same filters, resumes with Last-Event-ID after the connection ends, lists again when the API says the
// position has expired (410, or an error event), and backs off while the API cannot be reached. Every event goes
// to the feed's handler in order; the queue makes an event that comes twice, or an event and a poll about the same
// resource, one reconcile.
type watchSource struct {
	r    *Runner
	feed feedHandler
}

// run follows the feed until ctx ends.
func (w *watchSource) run(ctx context.Context) {
	r, kind := w.r, w.feed.feedKind()
	log := r.log.With(slog.String("kind", kind.Name), slog.String("source", SourceWatch))
	// position is where the watch continues from; resumed says it is an event's id rather than a list's position.
	position, resumed, relist := "", false, relistStart
	failures := 0
	for ctx.Err() == nil {
		if relist != "" {
			pos, err := w.feed.list(ctx)
			if err != nil {
				failures++
				if ctx.Err() == nil {
					log.Warn("listing before the watch failed; will retry", slog.Int("failures", failures), slog.Any("error", err))
				}
				r.sleep(ctx, r.retryDelay(failures))
				continue
			}
			if pos == "" {
				log.Warn("the API's list gave no resource_version: watching from the present, so changes made while listing may wait for the poll")
			}
			r.metrics.relists.WithLabelValues(kind.Name, relist).Inc()
			r.reached(SourceWatch, kind, pos)
			position, resumed, relist = pos, false, ""
		} else {
			r.metrics.reconnects.WithLabelValues(SourceWatch, kind.Name).Inc()
		}
		delivered, err := w.stream(ctx, position, resumed, func(id string) { position, resumed = id, true })
		if ctx.Err() != nil {
			return
		}
		if delivered {
			failures = 0
		}
		var re *relistError
		switch {
		case errors.As(err, &re):
			relist = re.reason
			log.Info("listing again before watching on", slog.String("reason", re.reason), slog.String("position", position), slog.Any("error", re.err))
			if re.reason == relistExpired {
				continue // nothing failed: the list can start at once
			}
			failures++
		case err != nil:
			failures++
			log.Warn("watch failed; will resume", slog.String("position", position), slog.Int("failures", failures), slog.Any("error", err))
		case delivered:
			continue // the API ended a stream that worked (a restart, a proxy's limit): resume at once
		default:
			failures++
			log.Debug("watch ended without an event; will resume", slog.String("position", position))
		}
		r.sleep(ctx, r.retryDelay(failures))
	}
}

// errIdle ends a watch connection that was silent for longer than the idle timeout.
var errIdle = errors.New("the watch sent nothing, not even a heartbeat, within the idle timeout")

// stream watches once, from position (a list's resource_version, or the id of the last event handled when
// resumed), calling advance with each handled event's id. It reports whether it handled any event, and why it
// ended: nil for the end of the stream, a *relistError when the watch must list again.
func (w *watchSource) stream(ctx context.Context, position string, resumed bool, advance func(id string)) (delivered bool, err error) {
	r, kind := w.r, w.feed.feedKind()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	q := w.feed.watchQuery()
	q.watch = true
	if resumed {
		q.lastEventID = position
	} else {
		q.resourceVersion = position
	}
	reqCtx := withOp(ctx, "watch")
	resp, err := r.api.watch(reqCtx, kind, q)
	if err != nil {
		return false, sendFailed(reqCtx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		answer, err := api.ReadAnswer[api.Problem](resp, nil)
		if err == nil {
			err = check(reqCtx, answer, nil)
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusGone && apiErr.Code == watchExpired {
			return false, &relistError{reason: relistExpired, err: err}
		}
		if err == nil {
			err = fmt.Errorf("hyperfleet-api watch %s: answered %d", kind.Plural, resp.StatusCode)
		}
		return false, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, fmt.Errorf("hyperfleet-api watch %s: answered %q, not an event stream", kind.Plural, ct)
	}
	// A connection that died without a word (a vanished peer, a NAT's dropped mapping) would block the read forever:
	// the API's heartbeats make silence longer than the idle timeout mean exactly that.
	idle := r.clock.NewTimer(r.cfg.WatchIdleTimeout)
	defer idle.Stop()
	go func() {
		select {
		case <-idle.C():
			cancel(errIdle)
		case <-ctx.Done():
		}
	}()
	body := &activityReader{r: resp.Body, active: func() {
		idle.Reset(r.cfg.WatchIdleTimeout)
		r.contact()
	}}
	err = api.ReadEvents(body, func(ev api.StreamEvent) error {
		if ev.Event == "error" {
			return watchError(kind, ev.Data)
		}
		if ev.Event == api.BookmarkEvent {
			// Nothing for this watch, but the stream has read this far: resuming from here skips nothing.
			if ev.ID != "" {
				advance(ev.ID)
			}
			delivered = true // the stream works: a clean end after it (the stream's lifetime) resumes at once
			return nil
		}
		// The resource stays raw JSON (WatchEvent's Object): only a dependents feed reads it, once.
		e := &api.WatchEvent{}
		if err := json.Unmarshal([]byte(ev.Data), e); err != nil {
			return &relistError{reason: relistFailed, err: fmt.Errorf("watch %s: event %s is not a WatchEvent: %w", kind.Plural, ev.ID, err)}
		}
		r.received(SourceWatch, kind, e)
		// The idle timeout measures the connection's silence, not this replica's work: an event whose handling
		// takes long (a dependents feed queueing a large fleet) must not end a connection that is fine.
		idle.Stop()
		err := w.feed.handle(ctx, &feedEvent{WatchEvent: *e, filtered: true})
		idle.Reset(r.cfg.WatchIdleTimeout)
		if err != nil {
			return &relistError{reason: relistFailed, err: fmt.Errorf("watch %s: event %d (%s %s): %w", kind.Plural, e.Seq, e.Type, e.Id, err)}
		}
		delivered = true
		id := ev.ID
		if id == "" {
			id = strconv.FormatInt(e.Seq, 10)
		}
		advance(id)
		return nil
	})
	if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
		return delivered, cause
	}
	return delivered, err
}

// watchError reads an error event: the API says the stream fell behind retention while connected, or something
// else ended it.
func watchError(kind *Kind, data string) error {
	var p api.Problem
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return fmt.Errorf("hyperfleet-api watch %s: an error event that is not a problem (%q): %w", kind.Plural, data, err)
	}
	err := fmt.Errorf("hyperfleet-api watch %s: error event %s %s", kind.Plural, p.Code, deref(p.Detail))
	if p.Code == watchExpired {
		return &relistError{reason: relistExpired, err: err}
	}
	return err
}

// activityReader calls active whenever a read returns bytes.
type activityReader struct {
	r      io.Reader
	active func()
}

func (a *activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.active()
	}
	return n, err
}

// healthWindow is how long the runtime may go without hearing from its sources before /readyz fails: three
// poll intervals when polls are all it has; beside a watch (heartbeats) or NATS (fetches), three idle timeouts at
// most, so that a dead feed does not wait for the slow safety-net poll.
func (r *Runner) healthWindow() time.Duration {
	if r.cfg.Source == SourcePoll {
		return 3 * r.cfg.PollInterval
	}
	return 3 * min(r.cfg.PollInterval, r.cfg.WatchIdleTimeout)
}
