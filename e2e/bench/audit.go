//go:build e2e

package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// auditPolicy records every request at the Metadata level (who, what verb,
// which resource, the response code; never a body), except health checks
// and the API server's own requests. The stages before the response are
// left out so that each request is one line.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/metrics", "/version", "/openapi*", "/api", "/apis", "/api/*", "/apis/*"]
- level: None
  users: ["system:apiserver"]
- level: Metadata
`

// auditFlags writes the audit policy to dir and returns the kube-apiserver
// flags that log to <dir>/kube-apiserver-audit.log. The log backend blocks
// (the default mode) rather than drop events, so the counts are exact.
func auditFlags(dir string) (flags []string, logPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("cannot create %s: %w", dir, err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", fmt.Errorf("cannot write audit policy: %w", err)
	}
	logPath = filepath.Join(dir, "kube-apiserver-audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		// Never rotate (0 would mean lumberjack's default of 100 MB);
		// readAudit reads rotated files too, should one appear anyway.
		"--audit-log-maxsize=1000000",
	}, logPath, nil
}

// An auditKey is one class of requests in the audit log.
type auditKey struct {
	Client   string // see clientOf
	Verb     string // create, update, patch, delete, deletecollection, get, list, watch
	Resource string // resource[/subresource]
	Code     int
}

// auditCounts are requests counted from the audit log, by class.
type auditCounts map[auditKey]float64

// A window is a named interval of time; requests received in it count.
type window struct {
	name     string
	from, to time.Time
}

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// readAudit counts the requests of the audit log at path (and of the
// files it was rotated to) received in each window, by window name.
func readAudit(path string, windows []window) (map[string]auditCounts, error) {
	out := map[string]auditCounts{}
	for _, w := range windows {
		out[w.name] = auditCounts{}
	}
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ".log") + "-*.log")
	if err != nil {
		return nil, fmt.Errorf("cannot find rotated audit logs: %w", err)
	}
	for _, p := range append(rotated, path) {
		if err := readAuditFile(p, windows, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readAuditFile(path string, windows []window, out map[string]auditCounts) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot open audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("cannot decode audit event in %s: %w", path, err)
		}
		if ev.Stage != "ResponseComplete" && ev.Stage != "Panic" {
			continue
		}
		k := auditKey{Client: clientOf(ev.User.Username), Verb: ev.Verb}
		if ev.ObjectRef != nil {
			k.Resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				k.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		if ev.ResponseStatus != nil {
			k.Code = ev.ResponseStatus.Code
		}
		t := ev.RequestReceivedTimestamp
		for _, w := range windows {
			if !t.Before(w.from) && t.Before(w.to) {
				out[w.name][k]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read audit log %s: %w", path, err)
	}
	return nil
}

// Client names in the benchmark's figures.
const (
	ClientHarness   = "harness"      // the benchmark itself: load generator and observers
	ClientProvider  = "provider-nop" // the test provider
	ClientKCM       = "kube-controller-manager"
	serviceAccounts = "system:serviceaccount:"
)

// loomServices are Loom's own services, whose writes are "Loom's writes".
var loomServices = map[string]bool{"watcher": true, "binder": true, "renderer": true, "secrets": true}

// clientOf names the client of a request by its user: a Loom service or
// the provider by ServiceAccount (loom-<name>), upstream Crossplane core
// by its own (crossplane-system:crossplane, RunVS), the harness by its admin
// certificate, kube-controller-manager by its own or its controllers'
// identities.
func clientOf(user string) string {
	switch {
	case strings.HasPrefix(user, serviceAccounts+"loom-system:loom-"):
		return strings.TrimPrefix(user, serviceAccounts+"loom-system:loom-")
	case user == serviceAccounts+"crossplane-system:"+crossplaneSA:
		return ClientCrossplane
	case user == "loom-admin":
		return ClientHarness
	case strings.HasPrefix(user, "system:kube-controller-manager"), strings.HasPrefix(user, serviceAccounts+"kube-system:"):
		return ClientKCM
	default:
		return user
	}
}

// auditWriteVerbs are the audit verbs that change state.
var auditWriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// auditReadVerbs are the audit verbs that read.
var auditReadVerbs = map[string]bool{"get": true, "list": true, "watch": true}

// sum adds the requests for which keep returns true.
func (c auditCounts) sum(keep func(auditKey) bool) float64 {
	var n float64
	for k, v := range c {
		if keep(k) {
			n += v
		}
	}
	return n
}

// by sums the requests of keep by the name label gives them.
func (c auditCounts) by(keep func(auditKey) bool, label func(auditKey) string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if keep(k) {
			out[label(k)] += v
		}
	}
	return out
}

func isLoom(k auditKey) bool        { return loomServices[k.Client] }
func isAuditWrite(k auditKey) bool  { return auditWriteVerbs[k.Verb] }
func isAuditRead(k auditKey) bool   { return auditReadVerbs[k.Verb] }
func loomWrite(k auditKey) bool     { return isLoom(k) && isAuditWrite(k) }
func loomRead(k auditKey) bool      { return isLoom(k) && isAuditRead(k) }
func providerWrite(k auditKey) bool { return k.Client == ClientProvider && isAuditWrite(k) }
func harnessWrite(k auditKey) bool  { return k.Client == ClientHarness && isAuditWrite(k) }
func loomOrProvWrite(k auditKey) bool {
	return (isLoom(k) || k.Client == ClientProvider) && isAuditWrite(k)
}
func verbLabel(k auditKey) string     { return k.Verb }
func clientVerbRes(k auditKey) string { return k.Client + ": " + k.Verb + " " + k.Resource }

// timelineEvent is the part of an audit event a timeline shows.
type timelineEvent struct {
	auditEvent
	StageTimestamp time.Time `json:"stageTimestamp"`
	ObjectRef      *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
}

// WriteTimeline writes, one line per request, every request of the audit
// log at path (rotated files included) on an object whose name starts with
// prefix: seconds since the first, duration, client, verb, resource, the
// name's rest and the response code. With a claim's name it shows the
// claim's whole life: its XR and composed resources are named after it.
func WriteTimeline(w io.Writer, path, prefix string) error {
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ".log") + "-*.log")
	if err != nil {
		return fmt.Errorf("cannot find rotated audit logs: %w", err)
	}
	var t0 time.Time
	for _, p := range append(rotated, path) {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("cannot open audit log: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), prefix) {
				continue
			}
			var ev timelineEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				_ = f.Close()
				return fmt.Errorf("cannot decode audit event in %s: %w", p, err)
			}
			if ev.ObjectRef == nil || !strings.HasPrefix(ev.ObjectRef.Name, prefix) || ev.Stage != "ResponseComplete" {
				continue
			}
			if t0.IsZero() {
				t0 = ev.RequestReceivedTimestamp
			}
			res := ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				res += "/" + ev.ObjectRef.Subresource
			}
			code := 0
			if ev.ResponseStatus != nil {
				code = ev.ResponseStatus.Code
			}
			fmt.Fprintf(w, "%9.3fs %8.1fms %-14s %-7s %-22s %-24s %d\n",
				ev.RequestReceivedTimestamp.Sub(t0).Seconds(),
				float64(ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp).Microseconds())/1000,
				clientOf(ev.User.Username), ev.Verb, res, strings.TrimPrefix(ev.ObjectRef.Name, prefix), code)
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("cannot read audit log %s: %w", p, err)
		}
	}
	return nil
}
