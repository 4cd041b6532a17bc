package watch

import "testing"

func TestFirstStatuses(t *testing.T) {
	required := func(template string) bool { return template != "optional" }
	t.Run("SecondToAskDelivers", func(t *testing.T) {
		// Two resources that must be Ready get their status: the first to
		// ask waits for the other, the second finds both observed.
		var f firstStatuses
		f.xr("xr", false, true, "")
		f.composed("xr", "a", false, "a", false)
		f.composed("xr", "b", false, "b", false)
		f.composed("xr", "c", false, "optional", false)
		f.composed("xr", "a", false, "a", true)
		if !f.awaits("xr", "a", required) {
			t.Error("a's change: awaits() = false, want true (b has no status)")
		}
		f.composed("xr", "b", false, "b", true)
		if f.awaits("xr", "b", required) {
			t.Error("b's change: awaits() = true, want false (a has a status; c's template does not require Ready)")
		}
		if !f.xr("xr", false, true, "False") {
			t.Error("first Ready condition False after a withheld change: xr() = false, want true")
		}
		if f.len() != 0 {
			t.Errorf("len() = %d after the XR's first Ready condition, want 0", f.len())
		}
		if f.awaits("xr", "a", required) {
			t.Error("awaits() = true for an XR with a Ready condition, want false")
		}
	})
	t.Run("ReadyFirst", func(t *testing.T) {
		// An XR whose first Ready condition is True was rendered with every
		// resource Ready: nothing withheld is stale.
		var f firstStatuses
		f.xr("xr", false, true, "")
		f.composed("xr", "a", false, "a", true)
		f.composed("xr", "b", false, "b", false)
		f.awaits("xr", "a", required)
		if f.xr("xr", false, true, "True") {
			t.Error("xr() = true for a first Ready condition True, want false")
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		// Nothing is withheld for an XR the watcher has not seen without
		// a Ready condition, or whose status it does not know, nor for a
		// sibling that is gone or whose template is unknown.
		var f firstStatuses
		f.composed("xr", "b", false, "b", false)
		if f.awaits("xr", "a", required) {
			t.Error("XR never seen: awaits() = true, want false")
		}
		f.xr("xr", false, false, "")
		if f.awaits("xr", "a", required) || f.len() != 0 {
			t.Error("XR status unknown: awaits() = true or kept, want neither")
		}
		f.xr("xr", false, true, "")
		f.composed("xr", "b", false, "", false)
		f.composed("xr", "c", false, "c", false)
		f.composed("xr", "c", true, "c", false)
		if f.awaits("xr", "a", required) {
			t.Error("siblings gone or of unknown templates: awaits() = true, want false")
		}
		f.composed("xr", "b", false, "b", false)
		if !f.awaits("xr", "a", required) {
			t.Error("awaits() = false with b unobserved, want true")
		}
		if f.xr("xr", true, true, "") || f.len() != 0 {
			t.Error("deleted XR: xr() = true or kept, want neither")
		}
	})
}
