package fn

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

func TestCache(t *testing.T) {
	type call struct {
		function, tag string
		advance       time.Duration // clock moves before the call
	}
	rsp := func(tag string, ttl time.Duration, fatal bool) *fnv1.RunFunctionResponse {
		r := &fnv1.RunFunctionResponse{Meta: &fnv1.ResponseMeta{Tag: tag, Ttl: durationpb.New(ttl)}}
		if fatal {
			r.Results = []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL}}
		}
		return r
	}
	cases := map[string]struct {
		reason string
		answer func(tag string) *fnv1.RunFunctionResponse
		opts   []CacheOption
		calls  []call
		want   int // calls that reached the function
	}{
		"HitWithinTTL": {
			reason: "The same function and tag within the TTL is a hit.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Minute, false) },
			calls:  []call{{"f", "a", 0}, {"f", "a", 59 * time.Second}},
			want:   1,
		},
		"MissAfterTTL": {
			reason: "An entry expires with its TTL.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Minute, false) },
			calls:  []call{{"f", "a", 0}, {"f", "a", time.Minute}},
			want:   2,
		},
		"MaxTTL": {
			reason: "The cache's max TTL caps a response's TTL.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Hour, false) },
			opts:   []CacheOption{WithCacheMaxTTL(time.Second)},
			calls:  []call{{"f", "a", 0}, {"f", "a", 2 * time.Second}},
			want:   2,
		},
		"KeyedByFunction": {
			reason: "The same tag for another function is a miss.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Minute, false) },
			calls:  []call{{"f", "a", 0}, {"g", "a", 0}},
			want:   2,
		},
		"NoTTL": {
			reason: "A response without TTL is not kept.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, 0, false) },
			calls:  []call{{"f", "a", 0}, {"f", "a", 0}},
			want:   2,
		},
		"Fatal": {
			reason: "A response with a fatal result is not kept.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Minute, true) },
			calls:  []call{{"f", "a", 0}, {"f", "a", 0}},
			want:   2,
		},
		"WrongTag": {
			reason: "A response that does not echo the tag is not kept.",
			answer: func(string) *fnv1.RunFunctionResponse { return rsp("other", time.Minute, false) },
			calls:  []call{{"f", "a", 0}, {"f", "a", 0}},
			want:   2,
		},
		"NoTag": {
			reason: "A request without tag bypasses the cache.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Minute, false) },
			calls:  []call{{"f", "", 0}, {"f", "", 0}},
			want:   2,
		},
		"Bounded": {
			reason: "The least recently used entry goes when the cache is full.",
			answer: func(tag string) *fnv1.RunFunctionResponse { return rsp(tag, time.Minute, false) },
			opts:   []CacheOption{WithCacheSize(2)},
			// a, b, a (hit, a is now recent), c (evicts b), a (hit), b (miss).
			calls: []call{{"f", "a", 0}, {"f", "b", 0}, {"f", "a", 0}, {"f", "c", 0}, {"f", "a", 0}, {"f", "b", 0}},
			want:  4,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := time.Unix(0, 0)
			reached := 0
			next := RunnerFn(func(_ context.Context, _ string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
				reached++
				return tc.answer(req.GetMeta().GetTag()), nil
			})
			c := NewCache(next, append(tc.opts, WithCacheClock(func() time.Time { return now }))...)
			for _, cl := range tc.calls {
				now = now.Add(cl.advance)
				got, err := c.RunFunction(t.Context(), cl.function, &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: cl.tag}})
				if err != nil {
					t.Fatal(err)
				}
				// Callers may modify what they get without harming the cache.
				got.Meta.Tag = "modified"
			}
			if diff := cmp.Diff(tc.want, reached); diff != "" {
				t.Errorf("%s\ncalls reaching the function: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
