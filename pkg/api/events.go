package api

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// StreamEvent is one dispatched Server-Sent Event of a watch (the list operations with watch=true): its data is a
// WatchEvent, or a Problem for the event type "error".
type StreamEvent struct {
	// ID is the stream's last event id after this event: its own id: field, or the one before it (the SSE rule).
	ID    string
	Event string // "message" when the event named no type
	Data  string
}

// BookmarkEvent is the type of the event a watch sends when it has shown nothing for a while (its heartbeat): its
// id: is how far the stream has read the change feed, so resuming from it skips nothing the watch would show, and
// its data is {"position": <the same>}, not a WatchEvent.
const BookmarkEvent = "bookmark"

// MaxEventLine bounds one line of a stream; an event's data is one line of JSON, the resource at most 128 KiB of spec
// plus its status.
const MaxEventLine = 4 << 20

// ReadEvents parses a text/event-stream as the HTML standard's event-stream interpretation does (lines end with CRLF,
// LF or CR; "field: value" with one optional space after the colon; data lines joined with LF; comments and unknown
// fields ignored; an event without data is not dispatched, though its id: still counts) and calls fn for each
// event in order. It returns fn's first error, the reader's, or nil at the end of the stream.
//
// It parses with the standard library rather than an SSE client library: the parsing is this function, while
// reconnecting, resuming and backing off are the caller's own (the adapter runtime's, the CLI's: Last-Event-ID from
// their position, 410 → list again, the generated client's transport), which the libraries on the module proxy
// either do their own way or are not yet at a stable version for.
func ReadEvents(r io.Reader, fn func(StreamEvent) error) error {
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 0, 64<<10), MaxEventLine)
	lines.Split(scanSSELines)
	var (
		lastID, event string
		data          strings.Builder
		hasData       bool
	)
	for lines.Scan() {
		line := lines.Text()
		if line == "" {
			if hasData {
				if event == "" {
					event = "message"
				}
				if err := fn(StreamEvent{ID: lastID, Event: event, Data: data.String()}); err != nil {
					return err
				}
			}
			event, hasData = "", false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: the API's heartbeats and "watching after N"
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				lastID = value
			}
		}
	}
	return lines.Err()
}

// scanSSELines splits a stream into lines ended by CRLF, LF or CR.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		switch {
		case data[i] == '\n':
			return i + 1, data[:i], nil
		case i+1 < len(data) && data[i+1] == '\n':
			return i + 2, data[:i], nil
		case i+1 < len(data) || atEOF:
			return i + 1, data[:i], nil
		default:
			return 0, nil, nil // a CR at the end of what was read: an LF may follow it
		}
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}
