package xcrd

import "time"

// PublishedAfter reports whether a, an XR's or claim's
// status.connectionDetails.lastPublishedTime (RFC 3339), is after b. An
// unreadable a is after nothing; any readable a is after an unreadable or
// empty b.
func PublishedAfter(a, b string) bool {
	ta, err := time.Parse(time.RFC3339, a)
	if err != nil {
		return false
	}
	tb, err := time.Parse(time.RFC3339, b)
	return err != nil || ta.After(tb)
}
