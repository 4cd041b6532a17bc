package framework

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const metricsText = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="nop.crossplane.io",resource="nopresources",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="nop.crossplane.io",resource="nopresources",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="nop.crossplane.io",resource="nopresources",scope="resource",subresource="",verb="PATCH",version="v1alpha1"} 100
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total_other{resource="secrets"} 50
`

func TestSumCounter(t *testing.T) {
	cases := map[string]struct {
		reason string
		text   string
		labels map[string]string
		want   float64
		err    bool
	}{
		"SumsAcrossCodes": {
			reason: "Series that differ only in labels not asked for are summed.",
			text:   metricsText,
			labels: map[string]string{"resource": "nopresources", "subresource": "status", "verb": "PATCH"},
			want:   9,
		},
		"EmptyLabelValue": {
			reason: "An empty label value matches only empty values, not every value.",
			text:   metricsText,
			labels: map[string]string{"resource": "nopresources", "subresource": ""},
			want:   100,
		},
		"OtherMetricIgnored": {
			reason: "A metric whose name merely starts with the asked name is not counted.",
			text:   metricsText,
			labels: map[string]string{"resource": "secrets"},
			want:   3,
		},
		"NoMatch": {
			reason: "No matching series sums to zero.",
			text:   metricsText,
			labels: map[string]string{"verb": "DELETE"},
		},
		"BadValue": {
			reason: "A value that is not a number is an error.",
			text:   `apiserver_request_total{verb="GET"} many`,
			labels: map[string]string{"verb": "GET"},
			err:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := sumCounter([]byte(tc.text), "apiserver_request_total", tc.labels)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nsumCounter(...): want error %t, got %v", tc.reason, tc.err, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsumCounter(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func FuzzSumCounter(f *testing.F) {
	f.Add(metricsText, "resource", "nopresources")
	f.Add("apiserver_request_total{a=\"b\"} 1e3\n", "a", "b")
	f.Fuzz(func(t *testing.T, text, k, v string) {
		_, _ = sumCounter([]byte(text), "apiserver_request_total", map[string]string{k: v})
	})
}

func TestPoll(t *testing.T) {
	errNotYet := errors.New("not yet")
	cases := map[string]struct {
		reason  string
		succeed int // call on which f succeeds; 0 means never
		timeout time.Duration
		wantErr bool
	}{
		"Immediate": {
			reason:  "A function that succeeds at once returns at once.",
			succeed: 1,
			timeout: time.Second,
		},
		"AfterRetries": {
			reason:  "A function is called again until it succeeds.",
			succeed: 3,
			timeout: 10 * time.Second,
		},
		"Timeout": {
			reason:  "A function that never succeeds fails with its last error once the deadline passes.",
			timeout: 3 * PollInterval,
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := poll(t.Context(), tc.timeout, func() error {
				calls++
				if calls == tc.succeed {
					return nil
				}
				return errNotYet
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\npoll(...): want error %t, got %v", tc.reason, tc.wantErr, err)
			}
			if tc.wantErr && !errors.Is(err, errNotYet) {
				t.Errorf("%s\npoll(...): error %v does not wrap the last error", tc.reason, err)
			}
			if !tc.wantErr && calls != tc.succeed {
				t.Errorf("%s\npoll(...): want %d calls, got %d", tc.reason, tc.succeed, calls)
			}
		})
	}
	t.Run("ContextEnds", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := poll(ctx, time.Hour, func() error { return errNotYet }); !errors.Is(err, errNotYet) {
			t.Errorf("poll with an ended context: want the last error, got %v", err)
		}
	})
}
