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
	"strconv"
	"time"
)

// scrapeJob is one job of Prometheus's configuration. Its JSON is the YAML
// Prometheus reads (JSON is YAML).
type scrapeJob struct {
	JobName         string         `json:"job_name"`
	Scheme          string         `json:"scheme,omitempty"`
	ScrapeProtocols []string       `json:"scrape_protocols,omitempty"`
	TLSConfig       *tlsConfig     `json:"tls_config,omitempty"`
	StaticConfigs   []staticConfig `json:"static_configs"`
}

type tlsConfig struct {
	CAFile   string `json:"ca_file,omitempty"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

type staticConfig struct {
	Targets []string `json:"targets"`
}

// openMetricsFirst asks targets for OpenMetrics, the format that carries
// exemplars, and falls back to the Prometheus text format.
var openMetricsFirst = []string{"OpenMetricsText1.0.0", "PrometheusText0.0.4"}

// startPrometheus writes Prometheus's configuration into dir and starts it
// on a free loopback port with exemplar storage on.
func startPrometheus(ctx context.Context, bin, dir string, interval time.Duration, jobs []scrapeJob) (*proc, string, error) {
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     interval.String(),
			"scrape_timeout":      interval.String(),
			"evaluation_interval": interval.String(),
		},
		"scrape_configs": jobs,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, "", fmt.Errorf("cannot write %s: %w", path, err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, "", err
	}
	addr := hostPort(ports[0])
	p, err := startProc("prometheus", filepath.Join(dir, "prometheus.log"), bin,
		"--config.file="+path,
		"--web.listen-address="+addr,
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"),
		"--storage.tsdb.retention.time=1d",
		"--enable-feature=exemplar-storage",
		"--log.level=warn",
	)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	if err := p.waitReady(ctx, base+"/-/ready", 2*time.Minute); err != nil {
		p.stop(5 * time.Second)
		return nil, "", err
	}
	return p, base, nil
}

// promClient queries Prometheus's HTTP API.
type promClient struct{ base string }

// series is one series of a range query's result.
type series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// points returns the series' samples as times and values (NaN and Inf
// kept as such).
func (s series) points() ([]time.Time, []float64) {
	ts := make([]time.Time, 0, len(s.Values))
	vs := make([]float64, 0, len(s.Values))
	for _, v := range s.Values {
		sec, _ := v[0].(float64)
		str, _ := v[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			continue
		}
		ts = append(ts, time.Unix(0, int64(sec*float64(time.Second))))
		vs = append(vs, f)
	}
	return ts, vs
}

type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (c promClient) get(ctx context.Context, path string, q url.Values) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
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
	var r apiResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("cannot decode the answer of %s (%s): %w", path, rsp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// queryRange runs a range query from start to end at step.
func (c promClient) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	q := url.Values{
		"query": {expr},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', 3, 64)},
	}
	data, err := c.get(ctx, "/api/v1/query_range", q)
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string   `json:"resultType"`
		Result     []series `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("cannot decode a range query's result: %w", err)
	}
	return d.Result, nil
}

// labelValues returns the values of label on the series matching match,
// as Grafana's label_values(match, label) does.
func (c promClient) labelValues(ctx context.Context, label, match string) ([]string, error) {
	data, err := c.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": {match}})
	if err != nil {
		return nil, err
	}
	var out []string
	return out, json.Unmarshal(data, &out)
}

// exemplar is one exemplar of a series.
type exemplar struct {
	Labels    map[string]string `json:"labels"`
	Value     string            `json:"value"`
	Timestamp float64           `json:"timestamp"`
}

// exemplars returns the exemplars of the series of expr between start and
// end.
func (c promClient) exemplars(ctx context.Context, expr string, start, end time.Time) ([]exemplar, error) {
	q := url.Values{
		"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix()+1, 10)},
	}
	data, err := c.get(ctx, "/api/v1/query_exemplars", q)
	if err != nil {
		return nil, err
	}
	var d []struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []exemplar        `json:"exemplars"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("cannot decode exemplars: %w", err)
	}
	var out []exemplar
	for _, s := range d {
		out = append(out, s.Exemplars...)
	}
	return out, nil
}

// targetsUp returns the scrape targets' health by job and instance.
func (c promClient) targetsUp(ctx context.Context) (map[string]string, error) {
	data, err := c.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}})
	if err != nil {
		return nil, err
	}
	var d struct {
		ActiveTargets []struct {
			Labels    map[string]string `json:"labels"`
			Health    string            `json:"health"`
			LastError string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range d.ActiveTargets {
		h := t.Health
		if t.LastError != "" {
			h += ": " + t.LastError
		}
		out[t.Labels["job"]+" "+t.Labels["instance"]] = h
	}
	return out, nil
}
