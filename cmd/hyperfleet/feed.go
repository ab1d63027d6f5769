package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// feed is the source of get --watch: it lists, then follows the API's change feed from the list's position (a
// watch: GET …?watch=true, Server-Sent Events), applying each event to the listing and reporting it. After a
// disconnect it resumes with Last-Event-ID, so that no change is missed or repeated; when the API no longer keeps
// the position (410 HYPERFLEET-WAT-001) it lists again.
type feed struct {
	c      *client
	kind   *api.Kind
	parent uuid.UUID
	// params are the list's; the watch takes their filters (search, include_deleted).
	params api.ListParams
	// adapters are those whose reports the listing shows (params.Statuses); a watch's events come without them.
	adapters []string
	// list fetches the listing the watch starts from, with the position it reflects (envelope.ResourceVersion).
	list func(ctx context.Context) (*listing, error)
	// warn is told about a failure a retry may get past.
	warn func(error)
	// retry is how long to wait before trying again after such a failure.
	retry time.Duration
}

// errRelist ends a watch whose position the API no longer keeps.
var errRelist = errors.New("the watch must list again")

// watchExpired is the problem code of a position older than the events the API keeps.
const watchExpired = "HYPERFLEET-WAT-001"

func (f *feed) follow(ctx context.Context, emit func(*listing) error) error {
	for {
		l, err := f.list(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && transient(err):
			f.warn(err)
			if err := sleep(ctx, f.retry); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		if err := emit(l); err != nil {
			return err
		}
		if err := f.watch(ctx, l, emit); !errors.Is(err, errRelist) {
			return err
		}
	}
}

// watch applies the events after l's position to l until ctx ends (nil... as ctx.Err()), emit fails, or the API
// no longer keeps the position (errRelist).
func (f *feed) watch(ctx context.Context, l *listing, emit func(*listing) error) error {
	lastID := ""
	for {
		p := f.params
		p.Page, p.Size, p.After, p.Count, p.Statuses = nil, nil, nil, nil, nil
		p.Watch = ptr(true)
		if lastID != "" {
			p.LastEventID = &lastID
		} else if l.envelope.ResourceVersion != "" {
			p.ResourceVersion = &l.envelope.ResourceVersion
		}
		// bookmarked says the stream's last event was a bookmark: an end right after one is the API ending the
		// stream cleanly (its lifetime, a shutdown), to be resumed at once and without a word.
		bookmarked := false
		err := f.stream(ctx, p, func(ev api.StreamEvent) error {
			bookmarked = ev.Event == api.BookmarkEvent
			if ev.Event == "error" {
				var problem api.Problem
				if json.Unmarshal([]byte(ev.Data), &problem) == nil && problem.Code == watchExpired {
					return errRelist
				}
				return fmt.Errorf("the watch ended with an error event: %s", ev.Data)
			}
			if ev.Event == api.BookmarkEvent {
				// Nothing to show, but the stream has read this far: resume from here.
				if ev.ID != "" {
					lastID = ev.ID
				}
				return nil
			}
			var e api.WatchEvent
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
				return fmt.Errorf("a watch event that is not a WatchEvent: %w", err)
			}
			if ev.ID != "" {
				lastID = ev.ID
			} else {
				lastID = strconv.FormatInt(e.Seq, 10)
			}
			changed, err := f.apply(ctx, l, &e)
			if err != nil || !changed {
				return err
			}
			return emit(l)
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errRelist):
			return err
		case err == nil && bookmarked:
			continue
		case err == nil || transient(err) || errors.As(err, new(*streamCut)):
			// The API closed the stream (a restart, a drain), the connection broke, or the API could not be
			// reached: resume where it stopped.
			if err == nil {
				err = errors.New("the API closed the watch")
			}
			f.warn(err)
			if err := sleep(ctx, f.retry); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// stream opens one watch with p and hands each event to fn until the stream ends.
func (f *feed) stream(ctx context.Context, p api.ListParams, fn func(api.StreamEvent) error) error {
	// No overall timeout: a watch lasts as long as the command. The API's heartbeats keep proxies from closing it.
	resp, err := f.c.stream.ListResources(ctx, f.kind, f.parent, &p, func(_ context.Context, req *http.Request) error {
		req.Header.Set("Accept", "text/event-stream")
		return nil
	})
	if err != nil {
		return f.c.sendError(err)
	}
	if resp.StatusCode != http.StatusOK {
		_, err := f.c.do(resp, nil)
		var aerr *apiError
		if errors.As(err, &aerr) && aerr.status == http.StatusGone && aerr.problem.Code == watchExpired {
			return errRelist
		}
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if mt := api.MediaType(resp); mt != "text/event-stream" {
		return fmt.Errorf("the API answered the watch with %q, not an event stream", mt)
	}
	body := &readRecorder{r: resp.Body}
	err = api.ReadEvents(body, fn)
	if err != nil && body.err != nil && errors.Is(err, body.err) {
		return &streamCut{err: err}
	}
	return err
}

// streamCut is a watch whose connection broke while events were read.
type streamCut struct{ err error }

func (e *streamCut) Error() string { return "the watch's connection broke: " + e.err.Error() }

func (e *streamCut) Unwrap() error { return e.err }

// readRecorder keeps the error its reader returned, so that a broken connection is told from a bad event.
type readRecorder struct {
	r   io.Reader
	err error
}

func (r *readRecorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}

// apply changes l as e says and reports whether the listing changed: a removed resource leaves it, and so does one
// that left the list's filter (`left`); any other event brings the resource as the API now shows it (an event
// without one, whose resource is gone since, is dropped).
func (f *feed) apply(ctx context.Context, l *listing, e *api.WatchEvent) (bool, error) {
	at := -1
	for i, o := range l.objects {
		if o.Id == e.Id {
			at = i
		}
	}
	if e.Type == api.WatchEventTypeRemoved || e.Type == api.WatchEventTypeLeft || e.Object == nil {
		if at < 0 {
			return false, nil
		}
		l.objects = append(l.objects[:at], l.objects[at+1:]...)
		return true, nil
	}
	o, err := decodeObject(e.Object)
	if err != nil {
		return false, err
	}
	if err := f.c.embedReports(ctx, l.kind, o, f.adapters); err != nil {
		return false, err
	}
	if at >= 0 {
		l.objects[at] = o
	} else {
		l.objects = append(l.objects, o)
	}
	if l.kind.Parent != nil {
		if l.parents, err = f.c.parentNames(ctx, l.kind, l.objects, l.parents); err != nil {
			return false, err
		}
	}
	return true, nil
}

// sleep waits d, or returns ctx's error when it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
