package xcrd

import "testing"

func TestPublishedAfter(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"Later":           {a: "2026-01-01T00:00:01Z", b: "2026-01-01T00:00:00Z", want: true},
		"Earlier":         {a: "2026-01-01T00:00:00Z", b: "2026-01-01T00:00:01Z"},
		"Same":            {a: "2026-01-01T00:00:00Z", b: "2026-01-01T00:00:00Z"},
		"AfterNone":       {a: "2026-01-01T00:00:00Z", want: true},
		"NoneAfterAny":    {b: "2026-01-01T00:00:00Z"},
		"UnreadableA":     {a: "yesterday", b: "2026-01-01T00:00:00Z"},
		"AfterUnreadable": {a: "2026-01-01T00:00:00Z", b: "yesterday", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := PublishedAfter(tc.a, tc.b); got != tc.want {
				t.Errorf("PublishedAfter(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
