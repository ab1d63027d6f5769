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

// defaultHeartbeat is how long a watch stream shows nothing before a bookmark says how far it has read (and tells
// proxies it is alive).
const defaultHeartbeat = 15 * time.Second

// watchBatch bounds the events a stream takes from the feed at once.
const watchBatch = 500

// watchChunk bounds the events whose resources a stream reads in one query, and so holds at once.
const watchChunk = 64

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
// until the client goes away, the stream's lifetime ends (Config.WatchMaxLifetime, jittered) or the server shuts
// down: the last two end it cleanly after a bookmark, and the client resumes with Last-Event-ID, which also
// authenticates it again.
func (k *kindHandler) watch(w http.ResponseWriter, r *http.Request, opts resource.ListOptions, fields map[string]bool) {
	feed := k.s.cfg.Feed
	if feed == nil {
		k.fail(w, r, &resource.Error{Code: resource.CodeUnavailable, Message: "this server has no change feed to watch"})
		return
	}
	release, ok, perIdentity := k.s.watches.acquire(resource.CallerFrom(r.Context()).Name)
	if !ok {
		k.s.tooMany(w, r, "watches", perIdentity, watchRetryAfter)
		return
	}
	defer release()
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
	// A filtered watch tells its watcher when a resource stops matching, so it must know what matches.
	var view *matching
	if opts.Search != "" || opts.PendingFor != "" {
		if view, err = k.seedMatching(r.Context(), opts, feed.Head); err != nil {
			k.fail(w, r, err)
			return
		}
	}

	heartbeat := k.s.cfg.WatchHeartbeat
	if heartbeat <= 0 {
		heartbeat = defaultHeartbeat
	}
	// ctx ends with the request, or when the server stops streams (shutdown); end is when the stream's lifetime is.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-k.s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	var end time.Time // zero: no end
	if life := lifetime(k.s.cfg.WatchMaxLifetime); life > 0 {
		end = time.Now().Add(life)
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
	// Each write gets its own deadline, since a stream outlives the server's write timeout. Events go to the
	// connection as they are encoded (net/http buffers it) and out with a flush per chunk: a stream holds no
	// buffer of its own.
	deadline := func() bool { return rc.SetWriteDeadline(time.Now().Add(heartbeat+30*time.Second)) == nil }
	send := func(text string) bool {
		if !deadline() {
			return false
		}
		if _, err := io.WriteString(w, text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": watching after " + formatPosition(after) + "\n\n") {
		return
	}
	// A bookmark says how far the stream has read the feed, so that a watcher whose filter matched nothing for a
	// while resumes from there rather than from its last event, which retention may have dropped meanwhile. It
	// doubles as the heartbeat that keeps proxies from closing a silent stream, and it is the last word of a
	// stream that ends cleanly.
	lastWrite := time.Now()
	bookmark := func() bool {
		pos := formatPosition(after)
		lastWrite = time.Now()
		return send("id: " + pos + "\nevent: " + api.BookmarkEvent + "\ndata: {\"position\":\"" + pos + "\"}\n\n")
	}
	enc := json.NewEncoder(w)
	for {
		wait := heartbeat
		if !end.IsZero() {
			if wait = min(wait, time.Until(end)); wait <= 0 {
				bookmark() // the stream's lifetime is over: end cleanly, the client resumes
				return
			}
		}
		waitCtx, cancelWait := context.WithTimeout(ctx, wait)
		events, err := feed.Next(waitCtx, after, watchBatch)
		cancelWait()
		switch {
		case r.Context().Err() != nil:
			return
		case ctx.Err() != nil: // the server is shutting down: end cleanly, the client resumes elsewhere
			bookmark()
			return
		case errors.Is(err, context.DeadlineExceeded) && !end.IsZero() && !time.Now().Before(end):
			continue // the lifetime, not the heartbeat: the top of the loop ends the stream
		case errors.Is(err, context.DeadlineExceeded):
			if !bookmark() {
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
		// The resources of a chunk of events are read and written before the next chunk's are read, so that a
		// stream holds at most a chunk of them.
		sent := false
		for start := 0; start < len(events); start += watchChunk {
			chunk := events[start:min(start+watchChunk, len(events))]
			batch, err := k.watchEvents(ctx, chunk, opts, fields, public, view)
			if err != nil {
				if ctx.Err() == nil {
					k.s.log.WarnContext(r.Context(), "watch stream ended: reading the resources failed", "error", err, "request_id", requestID(r.Context()))
				}
				return
			}
			after.Seq = chunk[len(chunk)-1].Seq
			if len(batch) == 0 {
				continue
			}
			if !deadline() {
				return
			}
			for i := range batch {
				e := &batch[i]
				if _, err := io.WriteString(w, "id: "+formatPosition(resource.Position{Epoch: after.Epoch, Seq: e.Seq})+"\nevent: "+string(e.Type)+"\ndata: "); err != nil {
					return
				}
				// Encode ends the value with a newline; one more ends the event.
				if err := enc.Encode(e); err != nil {
					k.s.log.DebugContext(r.Context(), "watch stream ended: writing an event failed", "error", err, "request_id", requestID(r.Context()))
					return
				}
				if _, err := io.WriteString(w, "\n"); err != nil {
					return
				}
				k.s.metrics.delivered("sse", e.Time)
			}
			if rc.Flush() != nil {
				return
			}
			sent = true
		}
		switch {
		case sent:
			lastWrite = time.Now()
		case time.Since(lastWrite) >= heartbeat:
			// Busy with changes this watch does not show: still say how far it has read.
			if !bookmark() {
				return
			}
		}
	}
}

// watchEvents turns a batch of the feed into what this stream shows: its kind's events (under its parent), each
// with its resource as the list would show it now. With a filter (view not nil), an event whose resource the
// list's filters (search, pending_for) do not show is dropped, unless the resource was in the watcher's view: it
// is then sent as `left`, with the resource as it now is. An event whose resource is gone since (removed, or its
// event follows in the feed) is kept without it, since nothing is left to filter on and dropping it would lose the
// change.
func (k *kindHandler) watchEvents(ctx context.Context, events []resource.Event, opts resource.ListOptions,
	fields map[string]bool, public bool, view *matching) ([]api.WatchEvent, error) {
	var mine []resource.Event
	var ids []string
	caller := resource.CallerFrom(ctx)
	confined := k.d.Tenanted && !caller.AllTenants
	for i := range events {
		e := &events[i]
		if e.Kind != k.d.Kind || (opts.ParentID != "" && e.ParentID != opts.ParentID) {
			continue
		}
		// Another tenant's events are not this watcher's to see, not even as bare ids of resources gone since.
		if confined && e.Tenant != caller.Tenant {
			continue
		}
		mine = append(mine, *e)
		if e.Type != resource.EventRemoved {
			ids = append(ids, e.ID)
		}
	}
	objects := map[string]json.RawMessage{}
	if len(ids) > 0 {
		q := opts
		q.IDs, q.Page, q.Size, q.IncludeDeleted = ids, 1, len(ids), true
		if err := k.readObjects(ctx, q, fields, public, func(id string) bool { return true }, objects); err != nil {
			return nil, err
		}
	}
	// Without filters, a resource not found is gone; with them, it may only be filtered out, or have left.
	exists := map[string]bool{}
	left := map[string]json.RawMessage{}
	if view != nil && len(objects) < len(ids) {
		var unmatched []string
		leaving, born := map[string]bool{}, map[string]bool{}
		for i := range mine {
			e := &mine[i]
			born[e.ID] = born[e.ID] || e.Type == resource.EventCreated
			if _, ok := objects[e.ID]; ok || e.Type == resource.EventRemoved {
				continue
			}
			if _, seen := leaving[e.ID]; !seen {
				unmatched = append(unmatched, e.ID)
			}
			leaving[e.ID] = leaving[e.ID] || view.leaves(e, born[e.ID])
		}
		q := resource.ListOptions{ParentID: opts.ParentID, IDs: unmatched, Page: 1, Size: len(unmatched), IncludeDeleted: true}
		if err := k.readObjects(ctx, q, fields, public, func(id string) bool { exists[id] = true; return leaving[id] }, left); err != nil {
			return nil, err
		}
	}
	out := make([]api.WatchEvent, 0, len(mine))
	for i := range mine {
		e := &mine[i]
		obj, found := objects[e.ID]
		typ := api.WatchEventType(e.Type)
		switch {
		case view == nil:
		case found:
			view.saw(e, true)
		case e.Type == resource.EventRemoved:
			view.saw(e, false)
		case exists[e.ID]:
			view.saw(e, false)
			if _, leaves := left[e.ID]; !leaves {
				continue // not in the view, and still not: nothing to tell
			}
			// Sent once: the resource is out of the view now, and later events of this batch about it are not.
			obj, typ = left[e.ID], api.WatchEventTypeLeft
			delete(left, e.ID)
		}
		w, err := WatchEvent(*e)
		if err != nil {
			return nil, err
		}
		w.Type, w.Object = typ, obj
		out = append(out, w)
	}
	return out, nil
}

// readObjects reads the resources q selects and puts those want asks for into objects, encoded as the list would
// show them to this caller.
func (k *kindHandler) readObjects(ctx context.Context, q resource.ListOptions, fields map[string]bool, public bool,
	want func(id string) bool, objects map[string]json.RawMessage) error {
	fast := k.fastItems(&q, fields, public)
	_, err := k.s.svc.List(ctx, k.d, q, func(res *resource.Resource) error {
		if !want(res.ID) {
			return nil
		}
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
	return err
}

// expired turns the feed's ErrExpired into the 410 problem.
func expired(err error) error {
	if errors.Is(err, resource.ErrExpired) {
		return &resource.Error{Code: resource.CodeExpired, Message: err.Error() + "; list again and watch from the list's resource_version"}
	}
	return err
}
