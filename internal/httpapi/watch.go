package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// defaultHeartbeat is how long a watch stream stays silent before a comment line tells proxies it is alive.
const defaultHeartbeat = 15 * time.Second

// watchBatch bounds the events a stream handles at once: the resources of one batch are read in one query.
const watchBatch = 500

// WatchEvent is an event as the API sends it (the WatchEvent schema), without its resource: the watch adds that,
// the NATS relay sends it as it is.
func WatchEvent(e resource.Event) (api.WatchEvent, error) {
	id, err := uuid.Parse(e.ID)
	if err != nil {
		return api.WatchEvent{}, fmt.Errorf("event %d: resource id %q: %w", e.Seq, e.ID, err)
	}
	w := api.WatchEvent{Seq: e.Seq, Type: api.WatchEventType(e.Type), Kind: e.Kind, Id: id, Generation: e.Generation,
		ResourceVersion: strconv.FormatInt(e.Version, 10), Time: e.Time}
	if e.ParentID != "" {
		parent, err := uuid.Parse(e.ParentID)
		if err != nil {
			return api.WatchEvent{}, fmt.Errorf("event %d: parent id %q: %w", e.Seq, e.ParentID, err)
		}
		w.ParentId = &parent
	}
	return w, nil
}

// watchRequested reads the watch parameter.
func watchRequested(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("watch"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, badParam("watch", "must be true or false")
	}
}

func (s *Handler) feedHead() resource.Position {
	if s.cfg.Feed == nil {
		return resource.Position{}
	}
	return s.cfg.Feed.Head()
}

// formatPosition spells a position of the change feed as the API sends it (resource_version of a list, id: of an
// event): "<epoch>.<seq>". Clients treat it as opaque and hand it back.
func formatPosition(p resource.Position) string {
	if p.Epoch == "" {
		return strconv.FormatInt(p.Seq, 10) // no change feed: nothing to watch from
	}
	return p.Epoch + "." + strconv.FormatInt(p.Seq, 10)
}

// parsePosition reads a position as formatPosition spells it. A bare number (a position from before the feed had
// epochs) parses as one of no epoch: it is well formed, and the feed answers it 410, so the client lists again.
func parsePosition(s string) (resource.Position, bool) {
	epoch, seq, dotted := strings.Cut(strings.TrimSpace(s), ".")
	if !dotted {
		epoch, seq = "", epoch
	} else if epoch == "" || strings.Trim(epoch, "0123456789abcdef") != "" {
		return resource.Position{}, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 0 {
		return resource.Position{}, false
	}
	return resource.Position{Epoch: epoch, Seq: n}, true
}

// watchPosition is where a watch starts: after Last-Event-ID, else after resource_version, else at the present.
func (s *Handler) watchPosition(r *http.Request) (resource.Position, error) {
	for _, p := range []struct{ name, value string }{
		{"Last-Event-ID", r.Header.Get("Last-Event-ID")},
		{"resource_version", r.URL.Query().Get("resource_version")},
	} {
		if p.value == "" {
			continue
		}
		pos, ok := parsePosition(p.value)
		if !ok {
			return resource.Position{}, badParam(p.name, "must be a position in the change feed, as a list's resource_version or an event's id gives it")
		}
		return pos, nil
	}
	return s.feedHead(), nil
}

// watch streams the changes of the kind's resources that the list with opts would show, as Server-Sent Events,
// until the client goes away.
func (k *kindHandler) watch(w http.ResponseWriter, r *http.Request, opts resource.ListOptions, fields map[string]bool) {
	feed := k.s.cfg.Feed
	if feed == nil {
		k.fail(w, r, &resource.Error{Code: resource.CodeUnavailable, Message: "this server has no change feed to watch"})
		return
	}
	after, err := k.s.watchPosition(r)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	if err := feed.Check(r.Context(), after); err != nil {
		k.fail(w, r, expired(err))
		return
	}
	// A bad search or a missing parent is answered before the stream starts, as the list would.
	probe := opts
	probe.IDs, probe.Page, probe.Size = []string{}, 1, 1
	if _, err := k.s.svc.List(r.Context(), k.d, probe, func(*resource.Resource) error { return nil }); err != nil {
		k.fail(w, r, err)
		return
	}

	heartbeat := k.s.cfg.WatchHeartbeat
	if heartbeat <= 0 {
		heartbeat = defaultHeartbeat
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on as they come
	w.WriteHeader(http.StatusOK)
	k.s.metrics.watchStreams.Inc()
	defer k.s.metrics.watchStreams.Dec()
	public := !k.s.seesInternal(r)
	send := func(text string) bool {
		// A stream outlives the server's write timeout: each write gets its own deadline instead.
		if err := rc.SetWriteDeadline(time.Now().Add(heartbeat + 30*time.Second)); err != nil {
			return false
		}
		// Each batch is written whole (net/http buffers the connection): a stream holds no buffer of its own.
		if _, err := io.WriteString(w, text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": watching after " + formatPosition(after) + "\n\n") {
		return
	}
	for {
		waitCtx, cancel := context.WithTimeout(r.Context(), heartbeat)
		events, err := feed.Next(waitCtx, after, watchBatch)
		cancel()
		switch {
		case r.Context().Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			if !send(": heartbeat\n\n") {
				return
			}
			continue
		case errors.Is(err, resource.ErrExpired):
			// Fallen behind retention while connected: say so, and end the stream; resuming gets the 410.
			if problem, err := json.Marshal(map[string]string{"code": string(resource.CodeExpired), "detail": err.Error()}); err == nil {
				send("event: error\ndata: " + string(problem) + "\n\n")
			}
			return
		case err != nil:
			k.s.log.WarnContext(r.Context(), "watch stream ended: the change feed failed", "error", err, "request_id", requestID(r.Context()))
			return
		}
		after.Seq = events[len(events)-1].Seq
		batch, err := k.watchEvents(r.Context(), events, opts, fields, public)
		if err != nil {
			if r.Context().Err() == nil {
				k.s.log.WarnContext(r.Context(), "watch stream ended: reading the resources failed", "error", err, "request_id", requestID(r.Context()))
			}
			return
		}
		var text strings.Builder
		for i := range batch {
			e := &batch[i]
			data, err := json.Marshal(e)
			if err != nil {
				k.s.log.ErrorContext(r.Context(), "encode a watch event", "error", err)
				return
			}
			text.WriteString("id: " + formatPosition(resource.Position{Epoch: after.Epoch, Seq: e.Seq}) + "\nevent: " + string(e.Type) + "\ndata: ")
			text.Write(data)
			text.WriteString("\n\n")
			k.s.metrics.delivered("sse", e.Time)
		}
		if text.Len() > 0 && !send(text.String()) {
			return
		}
	}
}

// watchEvents turns a batch of the feed into what this stream shows: its kind's events (under its parent), each
// with its resource as the list would show it now. An event whose resource the list's filters (search,
// pending_for) do not show is dropped; one whose resource is gone since (removed, or its event follows in the
// feed) is kept without it, since nothing is left to filter on and dropping it would lose the change.
func (k *kindHandler) watchEvents(ctx context.Context, events []resource.Event, opts resource.ListOptions,
	fields map[string]bool, public bool) ([]api.WatchEvent, error) {
	var mine []resource.Event
	var ids []string
	for _, e := range events {
		if e.Kind != k.d.Kind || (opts.ParentID != "" && e.ParentID != opts.ParentID) {
			continue
		}
		mine = append(mine, e)
		if e.Type != resource.EventRemoved {
			ids = append(ids, e.ID)
		}
	}
	objects := map[string]json.RawMessage{}
	if len(ids) > 0 {
		q := opts
		q.IDs, q.Page, q.Size, q.IncludeDeleted = ids, 1, len(ids), true
		fast := k.fastItems(&q, fields, public)
		_, err := k.s.svc.List(ctx, k.d, q, func(res *resource.Resource) error {
			if fast {
				raw, err := k.appendResource(nil, res)
				objects[res.ID] = json.RawMessage(raw)
				return err
			}
			item, err := k.present(res, public)
			if err != nil {
				return err
			}
			var doc any = item
			if fields != nil {
				if doc, err = project(item, fields); err != nil {
					return err
				}
			}
			objects[res.ID], err = json.Marshal(doc)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	// Without filters, a resource not found is gone; with them, it may only be filtered out.
	exists := map[string]bool{}
	if filtered := opts.Search != "" || opts.PendingFor != ""; filtered && len(objects) < len(ids) {
		var unmatched []string
		for _, id := range ids {
			if _, ok := objects[id]; !ok {
				unmatched = append(unmatched, id)
			}
		}
		q := resource.ListOptions{ParentID: opts.ParentID, IDs: unmatched, Page: 1, Size: len(unmatched), IncludeDeleted: true}
		if _, err := k.s.svc.List(ctx, k.d, q, func(res *resource.Resource) error { exists[res.ID] = true; return nil }); err != nil {
			return nil, err
		}
	}
	out := make([]api.WatchEvent, 0, len(mine))
	for _, e := range mine {
		obj, found := objects[e.ID]
		if !found && exists[e.ID] {
			continue
		}
		w, err := WatchEvent(e)
		if err != nil {
			return nil, err
		}
		w.Object = obj
		out = append(out, w)
	}
	return out, nil
}

// expired turns the feed's ErrExpired into the 410 problem.
func expired(err error) error {
	if errors.Is(err, resource.ErrExpired) {
		return &resource.Error{Code: resource.CodeExpired, Message: err.Error() + "; list again and watch from the list's resource_version"}
	}
	return err
}
