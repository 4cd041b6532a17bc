//go:build e2e

package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// A requestKey is one series of the API server's apiserver_request_total.
type requestKey struct {
	Verb        string // POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION, GET, LIST, WATCH, ...
	Group       string
	Resource    string
	Subresource string
	Code        string
}

// requestCounts are readings of apiserver_request_total, by series. The
// counts are cumulative since the API server started: subtract two readings.
type requestCounts map[requestKey]float64

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = map[string]string{
	"POST":             "create",
	"PUT":              "update",
	"PATCH":            "patch",
	"APPLY":            "apply",
	"DELETE":           "delete",
	"DELETECOLLECTION": "deletecollection",
}

// readVerbs are the verbs of apiserver_request_total that only read.
var readVerbs = map[string]string{
	"GET":   "get",
	"LIST":  "list",
	"WATCH": "watch",
}

// readRequests reads apiserver_request_total from the API server's /metrics
// through kube (whose identity must be allowed to get /metrics: the admin's
// is).
func readRequests(ctx context.Context, kube kubernetes.Interface) (requestCounts, error) {
	b, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot get API server metrics: %w", err)
	}
	return parseRequests(string(b))
}

// parseRequests extracts the apiserver_request_total series of a
// Prometheus text exposition.
func parseRequests(text string) (requestCounts, error) {
	const metric = "apiserver_request_total{"
	out := requestCounts{}
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, "} ")
		if i < 0 {
			return nil, fmt.Errorf("cannot parse metric line %q", line)
		}
		labels, err := parseLabels(rest[:i])
		if err != nil {
			return nil, fmt.Errorf("cannot parse metric line %q: %w", line, err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[i+2:]), 64)
		if err != nil {
			return nil, fmt.Errorf("cannot parse value of metric line %q: %w", line, err)
		}
		out[requestKey{
			Verb:        labels["verb"],
			Group:       labels["group"],
			Resource:    labels["resource"],
			Subresource: labels["subresource"],
			Code:        labels["code"],
		}] += v
	}
	return out, nil
}

// parseLabels parses a Prometheus label set without braces, for example
// `code="200",verb="GET"`.
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return nil, fmt.Errorf("malformed label set at %q", s)
		}
		name := s[:eq]
		var v strings.Builder
		i := eq + 2
		for ; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				break
			}
			v.WriteByte(c)
		}
		if i >= len(s) {
			return nil, fmt.Errorf("unterminated value of label %s", name)
		}
		out[name] = v.String()
		s = strings.TrimPrefix(s[i+1:], ",")
	}
	return out, nil
}

// sub returns c minus before, series by series.
func (c requestCounts) sub(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// sum adds the series for which keep returns true.
func (c requestCounts) sum(keep func(requestKey) bool) float64 {
	var n float64
	for k, v := range c {
		if keep(k) {
			n += v
		}
	}
	return n
}

// isWrite reports whether k counts requests that change state.
func isWrite(k requestKey) bool { _, ok := writeVerbs[k.Verb]; return ok }

// isRead reports whether k counts requests that only read objects.
func isRead(k requestKey) bool { _, ok := readVerbs[k.Verb]; return ok }

// isBackgroundWrite reports whether k counts writes that happen whatever
// Loom does: the API server's own identity lease, renewed every few seconds.
func isBackgroundWrite(k requestKey) bool { return k.Resource == "leases" }

// byVerb sums the series of keep by the verb's lower-case name (names maps
// metric verbs to them).
func (c requestCounts) byVerb(keep func(requestKey) bool, names map[string]string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if keep(k) {
			out[names[k.Verb]] += v
		}
	}
	return out
}

// byResource sums the series of keep by "verb resource[/subresource]".
func (c requestCounts) byResource(keep func(requestKey) bool) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if !keep(k) {
			continue
		}
		r := k.Resource
		if k.Subresource != "" {
			r += "/" + k.Subresource
		}
		out[strings.ToLower(k.Verb)+" "+r] += v
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
