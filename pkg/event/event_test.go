package event

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestTruncate(t *testing.T) {
	long := strings.Repeat("a", 2048)
	// A three-byte rune straddles the cut.
	runes := strings.Repeat("a", NoteLimit-len(truncated)-1) + strings.Repeat("€", 10)
	cases := map[string]struct {
		reason string
		note   string
		want   string
	}{
		"Short": {
			reason: "A note within the limit is kept whole.",
			note:   "Bound composite resource x",
			want:   "Bound composite resource x",
		},
		"Limit": {
			reason: "A note of exactly the limit is kept whole.",
			note:   long[:NoteLimit],
			want:   long[:NoteLimit],
		},
		"Long": {
			reason: "A note of 2,048 bytes (the renderer's longest Synced message) is cut to the limit with a marker.",
			note:   long,
			want:   long[:NoteLimit-len(truncated)] + truncated,
		},
		"RuneBoundary": {
			reason: "A rune that straddles the cut is dropped whole, so the note stays valid UTF-8.",
			note:   runes,
			want:   strings.Repeat("a", NoteLimit-len(truncated)-1) + truncated,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Truncate(tc.note)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nTruncate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if len(got) > NoteLimit || !utf8.ValidString(got) {
				t.Errorf("%s\nTruncate(...): %d bytes, valid UTF-8 %t; want at most %d valid bytes", tc.reason, len(got), utf8.ValidString(got), NoteLimit)
			}
		})
	}
}
