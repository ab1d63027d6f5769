package hvclient

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

func TestResetAfter(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   time.Duration
		wantOK bool
	}{
		{name: "seconds until the reset, as documented", header: "42", want: 42 * time.Second, wantOK: true},
		{name: "fractional seconds", header: "1.5", want: 1500 * time.Millisecond, wantOK: true},
		{name: "zero", header: "0", want: 0, wantOK: true},
		{name: "padded", header: " 7 ", want: 7 * time.Second, wantOK: true},
		{name: "a Unix time instead", header: "1772618460", want: 60 * time.Second, wantOK: true},
		{name: "a Unix time already past", header: "1772618000", want: 0, wantOK: true},
		{name: "missing", header: "", wantOK: false},
		{name: "garbage", header: "soon", wantOK: false},
		{name: "negative", header: "-3", wantOK: false},
		{name: "not a number", header: "NaN", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := resetAfter(tt.header, now)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPauseAfter(t *testing.T) {
	headers := func(remaining, reset string) http.Header {
		h := http.Header{}
		if remaining != "" {
			h.Set(HeaderRateLimitRemaining, remaining)
		}
		if reset != "" {
			h.Set(HeaderRateLimitReset, reset)
		}
		return h
	}
	tests := []struct {
		name   string
		status int
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{name: "429 until the reset", status: 429, h: headers("0", "30"), want: 30 * time.Second, wantOK: true},
		{name: "429 resetting now pauses a second", status: 429, h: headers("0", "0"), want: time.Second, wantOK: true},
		{name: "429 without a reset", status: 429, h: headers("", ""), want: defaultPause, wantOK: true},
		{name: "429 with a reset past the window is capped at it", status: 429, h: headers("0", "7200"), want: Window, wantOK: true},
		{name: "429 with a reset at the window's end", status: 429, h: headers("0", "3600"), want: Window, wantOK: true},
		{name: "429 with a Unix reset a day away is capped", status: 429, h: headers("0", "1772704800"), want: Window, wantOK: true},
		{name: "429 with a malformed reset pauses the default", status: 429, h: headers("0", "soon"), want: defaultPause, wantOK: true},
		{name: "the last request of a window reset far off", status: 200, h: headers("0", "86400"), want: Window, wantOK: true},
		{name: "the last request of the window", status: 200, h: headers("0", "120"), want: 2 * time.Minute, wantOK: true},
		{name: "requests left", status: 200, h: headers("17", "120"), wantOK: false},
		{name: "no headers", status: 200, h: headers("", ""), wantOK: false},
		{name: "an error with requests left", status: 502, h: headers("3", "60"), wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := pauseAfter(tt.status, tt.h, now)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		name        string
		rps         float64
		burst       int
		shards      int
		wantRPS     float64
		wantBurst   int
		wantPerHour float64 // what the replicas together may send in Hivelocity's window
	}{
		{name: "one replica takes the whole budget", rps: 0.9, burst: 10, shards: 1, wantRPS: 0.9, wantBurst: 10, wantPerHour: 3240},
		{name: "three replicas share it", rps: 0.9, burst: 10, shards: 3, wantRPS: 0.3, wantBurst: 3, wantPerHour: 3240},
		{name: "ten replicas keep the burst a claim needs", rps: 0.9, burst: 10, shards: 10, wantRPS: 0.09, wantBurst: MinBurst, wantPerHour: 3240},
		{name: "no shard count counts as one", rps: 0.9, burst: 10, shards: 0, wantRPS: 0.9, wantBurst: 10, wantPerHour: 3240},
		{name: "no budget stays none", rps: 0, burst: 10, shards: 4, wantRPS: 0, wantBurst: MinBurst, wantPerHour: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rps, burst := Share(tt.rps, tt.burst, tt.shards)
			require.InDelta(t, tt.wantRPS, rps, 1e-12)
			require.Equal(t, tt.wantBurst, burst)
			require.InDelta(t, tt.wantPerHour, rps*float64(max(tt.shards, 1))*Window.Seconds(), 1e-6)
			require.LessOrEqual(t, rps*float64(max(tt.shards, 1))*Window.Seconds(), 3600.0, "over Hivelocity's 3,600 an hour")
		})
	}
}

// countingTransport answers every request with status and headers, and counts them.
type countingTransport struct {
	calls  atomic.Int32
	status int
	header http.Header
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return &http.Response{StatusCode: c.status, Header: c.header.Clone(), Body: http.NoBody, Request: req}, nil
}

func get(ctx context.Context, tb testing.TB, rt http.RoundTripper) error {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://hivelocity.invalid/api/v2/ssh_key/", http.NoBody)
	require.NoError(tb, err)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		require.NoError(tb, resp.Body.Close())
	}
	return err
}

func TestThrottlePausesEveryCallAfterA429(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderRateLimitReset, "3600")
	base := &countingTransport{status: http.StatusTooManyRequests, header: h}
	th := newThrottle(base, 0, 1)
	require.NoError(t, get(context.Background(), t, th)) // the 429 itself is an answer
	for range 5 {
		err := get(context.Background(), t, th)
		require.ErrorIs(t, err, ErrRateLimited)
		require.Greater(t, RetryAfter(err), 59*time.Minute)
	}
	require.Equal(t, int32(1), base.calls.Load(), "paused calls reached the API")
}

// A 429 whose reset lies a day ahead (a clock far off, or a misread header) pauses the calls for one window,
// not a day.
func TestThrottlePauseNeverOutlastsTheWindow(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderRateLimitReset, "86400")
	base := &countingTransport{status: http.StatusTooManyRequests, header: h}
	th := newThrottle(base, 0, 1)
	th.now = func() time.Time { return now }
	require.NoError(t, get(context.Background(), t, th))
	err := get(context.Background(), t, th)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Equal(t, Window, RetryAfter(err))
	th.now = func() time.Time { return now.Add(Window) }
	require.NoError(t, get(context.Background(), t, th), "calls go out again once the window has passed")
	require.Equal(t, int32(2), base.calls.Load())
}

func TestThrottleSendDeadline(t *testing.T) {
	base := &countingTransport{status: http.StatusOK}
	th := newThrottle(base, 1, 1) // one request now, the next in a second
	require.NoError(t, get(context.Background(), t, th))
	err := get(SendBy(context.Background(), time.Now().Add(50*time.Millisecond)), t, th)
	require.ErrorIs(t, err, ErrLate)
	require.Equal(t, int32(1), base.calls.Load(), "a late request was sent")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = get(ctx, t, th)
	require.ErrorIs(t, err, ErrRateLimited, "a budget that cannot serve the caller in time says so")
}

func TestThrottleReserveSendsBothRequestsWithoutWaiting(t *testing.T) {
	base := &countingTransport{status: http.StatusOK}
	th := newThrottle(base, 1, 2)
	ctx, err := th.reserve(context.Background(), 2)
	require.NoError(t, err)
	// The bucket is empty now: without the reservation the next requests would wait a second each.
	deadline := SendBy(ctx, time.Now().Add(100*time.Millisecond))
	require.NoError(t, get(deadline, t, th))
	require.NoError(t, get(deadline, t, th))
	require.ErrorIs(t, get(deadline, t, th), ErrLate, "only two were reserved")
	require.Equal(t, int32(2), base.calls.Load())

	_, err = th.reserve(SendBy(context.Background(), time.Now().Add(50*time.Millisecond)), 2)
	require.ErrorIs(t, err, ErrLate)
	require.True(t, errors.Is(err, ErrLate) && !errors.Is(err, ErrRateLimited))
}
