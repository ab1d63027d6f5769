package api

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func TestReadSSE(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []StreamEvent
	}{
		{
			name:   "the API's events and comments",
			stream: ": watching after 7\n\nid: 8\nevent: created\ndata: {\"seq\":8}\n\n: heartbeat\n\nid: 9\nevent: removed\ndata: {\"seq\":9}\n\n",
			want:   []StreamEvent{{ID: "8", Event: "created", Data: `{"seq":8}`}, {ID: "9", Event: "removed", Data: `{"seq":9}`}},
		},
		{
			name:   "CRLF and CR line ends",
			stream: "id: 1\r\nevent: a\r\ndata: x\r\n\r\nid: 2\revent: b\rdata: y\r\r",
			want:   []StreamEvent{{ID: "1", Event: "a", Data: "x"}, {ID: "2", Event: "b", Data: "y"}},
		},
		{
			name:   "data lines are joined, no space after the colon is fine, a type defaults to message",
			stream: "data:one\ndata: two\ndata\n\n",
			want:   []StreamEvent{{Event: "message", Data: "one\ntwo\n"}},
		},
		{
			name:   "an id without data is not dispatched but is the next event's",
			stream: "id: 5\n\ndata: later\n\n",
			want:   []StreamEvent{{ID: "5", Event: "message", Data: "later"}},
		},
		{
			name:   "unknown fields and retry are ignored; only one leading space is removed",
			stream: "retry: 100\nfoo: bar\nevent: error\ndata:  {\"code\":\"X\"}\n\n",
			want:   []StreamEvent{{Event: "error", Data: ` {"code":"X"}`}},
		},
		{
			name:   "an event cut off by the end of the stream is not dispatched",
			stream: "id: 1\ndata: complete\n\nid: 2\ndata: cut",
			want:   []StreamEvent{{ID: "1", Event: "message", Data: "complete"}},
		},
		{
			name:   "an id with NUL is ignored",
			stream: "id: 3\n\nid: a\x00b\ndata: x\n\n",
			want:   []StreamEvent{{ID: "3", Event: "message", Data: "x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []StreamEvent
			require.NoError(t, ReadEvents(strings.NewReader(tt.stream), func(e StreamEvent) error { got = append(got, e); return nil }))
			require.Equal(t, tt.want, got)
			// One byte at a time, so that a line end split across reads (CR, then LF) is still one line end.
			got = nil
			require.NoError(t, ReadEvents(iotest.OneByteReader(strings.NewReader(tt.stream)), func(e StreamEvent) error { got = append(got, e); return nil }))
			require.Equal(t, tt.want, got, "read one byte at a time")
		})
	}
}

func TestReadSSEStopsOnTheHandlersError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := ReadEvents(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(StreamEvent) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls)
}

func TestReadSSERefusesAnOverlongLine(t *testing.T) {
	err := ReadEvents(strings.NewReader("data: "+strings.Repeat("x", MaxEventLine)+"\n\n"), func(StreamEvent) error { return nil })
	require.Error(t, err)
}
