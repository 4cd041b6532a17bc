//go:build e2e

package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// startJaeger writes a configuration of Jaeger v2 (an OpenTelemetry
// Collector distribution) into dir: an OTLP/gRPC receiver, in-memory trace
// storage and the query service, each on a free loopback port, and no
// other listener (its own metrics are off). It returns the process, the
// OTLP endpoint (host:port) and the query service's base URL.
func startJaeger(ctx context.Context, bin, dir string) (*proc, string, string, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, "", "", err
	}
	otlp, query, grpcQuery := hostPort(ports[0]), hostPort(ports[1]), hostPort(ports[2])
	cfg := map[string]any{
		"service": map[string]any{
			"extensions": []string{"jaeger_storage", "jaeger_query"},
			"pipelines": map[string]any{
				"traces": map[string]any{
					"receivers":  []string{"otlp"},
					"processors": []string{"batch"},
					"exporters":  []string{"jaeger_storage_exporter"},
				},
			},
			"telemetry": map[string]any{
				"metrics": map[string]any{"level": "none"},
				"logs":    map[string]any{"level": "warn"},
			},
		},
		"extensions": map[string]any{
			"jaeger_storage": map[string]any{
				"backends": map[string]any{
					"memstore": map[string]any{"memory": map[string]any{"max_traces": 100000}},
				},
			},
			"jaeger_query": map[string]any{
				"storage": map[string]any{"traces": "memstore"},
				"http":    map[string]any{"endpoint": query},
				"grpc":    map[string]any{"endpoint": grpcQuery},
			},
		},
		"receivers": map[string]any{
			"otlp": map[string]any{"protocols": map[string]any{"grpc": map[string]any{"endpoint": otlp}}},
		},
		"processors": map[string]any{"batch": map[string]any{"timeout": "500ms"}},
		"exporters": map[string]any{
			"jaeger_storage_exporter": map[string]any{"trace_storage": "memstore"},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, "", "", err
	}
	path := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, "", "", fmt.Errorf("cannot write %s: %w", path, err)
	}
	p, err := startProc("jaeger", filepath.Join(dir, "jaeger.log"), bin, "--config="+path)
	if err != nil {
		return nil, "", "", err
	}
	base := "http://" + query
	if err := p.waitReady(ctx, base+"/api/services", 2*time.Minute); err != nil {
		p.stop(5 * time.Second)
		return nil, "", "", err
	}
	return p, otlp, base, nil
}

// jaegerClient reads traces from Jaeger's query API (the one its UI uses).
type jaegerClient struct{ base string }

// jTrace is a trace as Jaeger's API returns it.
type jTrace struct {
	TraceID   string              `json:"traceID"`
	Spans     []jSpan             `json:"spans"`
	Processes map[string]jProcess `json:"processes"`
}

type jSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	Tags          []jTag `json:"tags"`
}

type jTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jProcess struct {
	ServiceName string `json:"serviceName"`
}

// tag returns the value of the span's tag key as a string.
func (s jSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// isError reports whether the span's status is Error (Jaeger shows the
// OpenTelemetry status as the tag error=true).
func (s jSpan) isError() bool {
	return s.tag("error") == "true" || s.tag("otel.status_code") == "ERROR"
}

func (t jTrace) service(s jSpan) string { return t.Processes[s.ProcessID].ServiceName }

func (c jaegerClient) get(ctx context.Context, path string, q url.Values) ([]jTrace, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		return nil, err
	}
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, rsp.Status, b)
	}
	var d struct {
		Data []jTrace `json:"data"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("cannot decode the answer of %s: %w", path, err)
	}
	return d.Data, nil
}

// find searches the traces of service holding a span with every tag of
// tags.
func (c jaegerClient) find(ctx context.Context, service string, tags map[string]string) ([]jTrace, error) {
	b, err := json.Marshal(tags)
	if err != nil {
		return nil, err
	}
	return c.get(ctx, "/api/traces", url.Values{
		"service":  {service},
		"tags":     {string(b)},
		"lookback": {"6h"},
		"limit":    {"20"},
	})
}

// trace returns the trace with the given ID.
func (c jaegerClient) trace(ctx context.Context, id string) (jTrace, error) {
	ts, err := c.get(ctx, "/api/traces/"+url.PathEscape(id), nil)
	if err != nil {
		return jTrace{}, err
	}
	if len(ts) == 0 {
		return jTrace{}, fmt.Errorf("trace %s not found", id)
	}
	return ts[0], nil
}
