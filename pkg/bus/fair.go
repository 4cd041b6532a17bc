package bus

import (
	"fmt"
	"strings"
)

// Tenant keys for WithFairKey, by name (ParseFairKey).
const (
	FairKeyNamespace = "namespace"
	FairKeyNone      = "none"
)

// ParseFairKey returns the tenant key function named s, for a flag:
// "namespace" (NamespaceKey) or "none" (NoKey).
func ParseFairKey(s string) (func(Request) string, error) {
	switch s {
	case FairKeyNamespace, "":
		return NamespaceKey, nil
	case FairKeyNone:
		return NoKey, nil
	default:
		return nil, fmt.Errorf("cannot parse fair key %q: want %q or %q", s, FairKeyNamespace, FairKeyNone)
	}
}

// NoKey puts every request under one key: first come, first served.
func NoKey(Request) string { return "" }

// NamespaceKey is the tenant of a request: the target's namespace; for a
// cluster-scoped target, the event's tenant (the namespace of the claim an
// XR is bound to, which the watcher sets), else the namespace of the
// changed object or of its controller when they have one; else a key
// derived from the target's name (see nameKey).
func NamespaceKey(r Request) string {
	if ns := r.Target.GetNamespace(); ns != "" {
		return "ns/" + ns
	}
	if ns := r.Event.GetTenant(); ns != "" {
		return "ns/" + ns
	}
	if ns := r.Event.GetObject().GetNamespace(); ns != "" {
		return "ns/" + ns
	}
	if ns := r.Event.GetController().GetNamespace(); ns != "" {
		return "ns/" + ns
	}
	return "name/" + nameKey(r.Target.GetName())
}

// nameKey derives a tenant key from a cluster-scoped object's name: the
// name without its generated suffix (the last dash-separated segment, as in
// a claim's XR "db-7x2kq") and without the numeric segments before it (as
// in "import-0042-7x2kq"), so that objects created in one bulk share a key.
func nameKey(name string) string {
	parts := strings.Split(name, "-")
	if len(parts) < 2 {
		return name
	}
	parts = parts[:len(parts)-1]
	for len(parts) > 1 && isDigits(parts[len(parts)-1]) {
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts, "-")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
