package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiProcess reads the API process's own CPU time and resident memory from its Prometheus endpoint
// (process_cpu_seconds_total, process_resident_memory_bytes): the server's cost per request, which is steadier
// than req/s on a machine the load tool and the database share.
type apiProcess struct {
	url    string
	client *http.Client
}

// sample is the process's counters at one moment.
type sample struct {
	cpu time.Duration
	rss int64
	ok  bool
}

func (p *apiProcess) sample(ctx context.Context) sample {
	if p == nil || p.url == "" {
		return sample{}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, http.NoBody)
	if err != nil {
		return sample{}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return sample{}
	}
	defer resp.Body.Close()
	var s sample
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		name, value, found := strings.Cut(lines.Text(), " ")
		if !found {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				s.cpu, s.ok = time.Duration(v*float64(time.Second)), true
			}
		case "process_resident_memory_bytes":
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				s.rss = int64(v)
			}
		}
	}
	return s
}

// describe says where CPU figures come from, or why there are none.
func (p *apiProcess) describe(ctx context.Context) string {
	if p == nil || p.url == "" {
		return "API CPU per request: off (--metrics-url \"\")"
	}
	if !p.sample(ctx).ok {
		return fmt.Sprintf("API CPU per request: not measured (no process_cpu_seconds_total at %s; give --metrics-url)", p.url)
	}
	return "API CPU per request from " + p.url
}
