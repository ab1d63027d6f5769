package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// source reports the state of what a command follows: at once, and again at least whenever it changes, until ctx
// ends or emit fails. get --watch follows the API's change feed (feed); wait polls one resource (poller). The
// commands tell changed states from unchanged ones themselves.
type source[T any] interface {
	follow(ctx context.Context, emit func(T) error) error
}

// newSource returns a poller of fetch.
func newSource[T any](interval time.Duration, fetch func(context.Context) (T, error), warn func(error)) source[T] {
	return &poller[T]{interval: interval, fetch: fetch, warn: warn}
}

// poller is a source that fetches every interval and reports every state it fetched.
type poller[T any] struct {
	interval time.Duration
	fetch    func(context.Context) (T, error)
	// warn is told about a failed fetch that a later one may get past; any other failure ends follow.
	warn func(error)
}

func (p *poller[T]) follow(ctx context.Context, emit func(T) error) error {
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		v, err := p.fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			if err := emit(v); err != nil {
				return err
			}
		case transient(err):
			p.warn(err)
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// transient reports whether a failed request is worth repeating: no answer (a restarting API, a request that
// timed out), rate limiting or a server failure.
func transient(err error) bool {
	var unreachable *unreachableError
	if errors.As(err, &unreachable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var aerr *apiError
	return errors.As(err, &aerr) && (aerr.status == http.StatusTooManyRequests || aerr.status >= http.StatusInternalServerError)
}

// warner returns a warn function for a poller that prints each new failure once on stderr.
func (a *app) warner() func(error) {
	var last string
	return func(err error) {
		if msg := err.Error(); msg != last {
			last = msg
			fmt.Fprintf(a.stderr, "warning: %s (retrying)\n", msg)
		}
	}
}

// redraw shows each new state of a watched get. On a terminal it redraws the screen whenever the drawing
// changes (ages included); elsewhere it appends a new table, after a blank line, only when something other
// than the passing of time changed, so that a log of a watch reads as a list of changes.
type redraw struct {
	w       io.Writer
	tty     bool
	printer *printer
	now     func() time.Time
	last    []byte
	drawn   int
}

// clearScreen moves the cursor home and clears the screen (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

func (r *redraw) draw(l *listing) error {
	var drawing bytes.Buffer
	if err := r.render(&drawing, l, r.now()); err != nil {
		return err
	}
	if r.tty {
		if bytes.Equal(drawing.Bytes(), r.last) {
			return nil
		}
		r.last = drawing.Bytes()
		_, err := io.WriteString(r.w, clearScreen+drawing.String())
		return err
	}
	// A drawing at a fixed instant differs from the last one only if the resources did.
	var fingerprint bytes.Buffer
	if err := r.render(&fingerprint, l, time.Time{}); err != nil {
		return err
	}
	if r.drawn > 0 && bytes.Equal(fingerprint.Bytes(), r.last) {
		return nil
	}
	r.last = fingerprint.Bytes()
	if r.drawn > 0 {
		separator := "\n"
		if r.printer.format == formatYAML {
			separator = "---\n"
		}
		if _, err := io.WriteString(r.w, separator); err != nil {
			return err
		}
	}
	r.drawn++
	_, err := r.w.Write(drawing.Bytes())
	return err
}

func (r *redraw) render(w io.Writer, l *listing, now time.Time) error {
	if len(l.objects) == 0 && r.printer.tabular() {
		_, err := fmt.Fprintf(w, "No %s found.\n", l.kind.Plural)
		return err
	}
	return r.printer.print(w, l, now)
}
