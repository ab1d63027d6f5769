package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// report is a run's measurements, printed as one markdown table.
type report struct {
	cfg           config
	times         times
	procs         []process
	before, after snapshot
	requests      map[string]caller
	hivelocity    map[string]int
}

// topParts is how many of a figure's largest parts its cell names.
const topParts = 6

func (r report) print(w io.Writer) error {
	n := float64(r.cfg.clusters)
	devices := n * float64(r.cfg.replicas)
	rows := [][2]string{
		{"clusters (each with a node pool of " + fmt.Sprint(r.cfg.replicas) + " devices)", fmt.Sprintf("%d, created %d at a time", r.cfg.clusters, min(r.cfg.clusters, r.cfg.concurrency))},
		{"creates sent (clusters and node pools)", seconds(r.times.created)},
		{"all clusters Ready, from the first create", "**" + seconds(r.times.clustersReady) + "**"},
		{"all node pools Ready, from the first create", "**" + seconds(r.times.poolsReady) + "**"},
		{"all gone (clusters and pools, finalized), from the first delete", "**" + seconds(r.times.gone) + "**"},
	}
	apiCPU := r.after.cpu["hyperfleet-api"] - r.before.cpu["hyperfleet-api"]
	rows = append(rows, [2]string{"API CPU per cluster lifecycle", fmt.Sprintf("**%.1f ms**", ms(apiCPU)/n)})

	total := 0
	for identity, routes := range r.requests {
		if identity != self {
			total += sum(routes)
		}
	}
	rows = append(rows, [2]string{"API requests per cluster lifecycle (adapters; this program's own apart)", fmt.Sprintf("**%.1f**", float64(total)/n)})
	for _, identity := range byTotal(r.requests) {
		routes := r.requests[identity]
		label := "… by " + identity
		if identity == self {
			label = "this program's creates, deletes and counts (not in the total)"
		}
		rows = append(rows, [2]string{label, fmt.Sprintf("%.2f: %s", float64(sum(routes))/n, parts(routes, n))})
	}

	calls := 0
	for _, c := range r.hivelocity {
		calls += c
	}
	rows = append(rows, [2]string{"Hivelocity calls per device, claim to release", fmt.Sprintf("**%.2f**: %s", float64(calls)/devices, parts(r.hivelocity, devices))})

	kube := map[string]int{}
	for mc, after := range r.after.kube {
		for resource, v := range after {
			kube[cmp.Or(resource, "(non-resource)")] += int(v - r.before.kube[mc][resource])
		}
	}
	rows = append(rows, [2]string{fmt.Sprintf("management-cluster requests per cluster (%d kube-apiservers, apiserver_request_total)", len(r.after.kube)),
		fmt.Sprintf("**%.1f**: %s", float64(sum(kube))/n, parts(kube, n))})

	for _, p := range r.procs {
		cpu := r.after.cpu[p.name] - r.before.cpu[p.name]
		rows = append(rows, [2]string{p.name + ": CPU per cluster lifecycle, peak RSS",
			fmt.Sprintf("%.1f ms, %.0f MiB", ms(cpu)/n, float64(r.after.peak[p.name])/(1<<20))})
	}

	var b strings.Builder
	b.WriteString("| measurement | result |\n|---|---|\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func sum[K comparable](m map[K]int) int {
	total := 0
	for _, v := range m {
		total += v
	}
	return total
}

// byTotal orders the callers by their requests, most first.
func byTotal(m map[string]caller) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(sum(m[b]), sum(m[a])), strings.Compare(a, b))
	})
}

// parts names the largest parts of a figure, each divided by per: "GET /clusters/{cluster_id} 4.00, …".
func parts[M ~map[string]int](m M, per float64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
	var out []string
	rest := 0
	for i, k := range keys {
		if i >= topParts {
			rest += m[k]
			continue
		}
		out = append(out, fmt.Sprintf("%s %.2f", strings.ReplaceAll(k, "|", `\|`), float64(m[k])/per))
	}
	if rest > 0 {
		out = append(out, fmt.Sprintf("other %.2f", float64(rest)/per))
	}
	return strings.Join(out, ", ")
}
