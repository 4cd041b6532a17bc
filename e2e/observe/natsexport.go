//go:build e2e

package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// varzGauges are the fields of NATS's /varz the exporter serves, each under
// the name the NATS project's prometheus-nats-exporter gives it
// (gnatsd_varz_<field>), so that the dashboard's queries are the same
// against either. Counters are served as gauges, as that exporter does.
var varzGauges = []string{
	"connections", "total_connections", "subscriptions", "slow_consumers",
	"in_msgs", "out_msgs", "in_bytes", "out_bytes", "mem", "cpu",
}

// natsExporter serves, at /metrics, the /varz of each NATS server in the
// Prometheus text format, labelled server_id like prometheus-nats-exporter.
type natsExporter struct {
	monitors []string // base URLs of the servers' monitoring endpoints
	srv      *http.Server
	addr     string
}

func startNATSExporter(monitors []string) (*natsExporter, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen for the NATS exporter: %w", err)
	}
	e := &natsExporter{monitors: monitors, addr: l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", e.serve)
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.srv.Serve(l) }()
	return e, nil
}

func (e *natsExporter) stop() {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
}

func (e *natsExporter) serve(w http.ResponseWriter, r *http.Request) {
	values := map[string][]string{} // metric -> sample lines
	for _, m := range e.monitors {
		v, err := varz(r.Context(), m)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		id, _ := v["server_id"].(string)
		for _, f := range varzGauges {
			n, ok := v[f].(float64)
			if !ok {
				continue
			}
			name := "gnatsd_varz_" + f
			values[name] = append(values[name], fmt.Sprintf("%s{server_id=%q} %s", name, id, strconv.FormatFloat(n, 'g', -1, 64)))
		}
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# HELP %s NATS server /varz field %s.\n# TYPE %s gauge\n", n, strings.TrimPrefix(n, "gnatsd_varz_"), n)
		for _, l := range values[n] {
			b.WriteString(l + "\n")
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = io.WriteString(w, b.String())
}

// varz reads a server's /varz.
func varz(ctx context.Context, base string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/varz", nil)
	if err != nil {
		return nil, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s/varz: %w", base, err)
	}
	defer rsp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(rsp.Body).Decode(&v); err != nil {
		return nil, fmt.Errorf("cannot decode %s/varz: %w", base, err)
	}
	return v, nil
}
