package mirror

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A Key names one object in the mirror: its group and kind, not its version
// (one object is one entry, whichever version the watcher watches it at),
// its namespace (empty for cluster-scoped objects) and its name.
//
// In the bucket a key is four tokens, <group>.<kind>.<namespace>.<name>,
// each escaped so that it holds no dot: a dot becomes "_" and every byte
// outside [A-Za-z0-9-] becomes "=" and two upper-case hex digits ("_" itself
// is "=5F"). An empty group (the core API group) or namespace (a
// cluster-scoped object) is the token "_", which no non-empty value escapes
// to. So a Claim named w1.a in team-a of group example.org is
// "example_org.Claim.team-a.w1_a", and a ConfigMap named cfg in team-a is
// "_.ConfigMap.team-a.cfg". Names may contain dots, so the token separator
// could not otherwise tell the parts apart; the escaping keeps keys readable
// in `nats kv ls` and lets a reader select one kind, or one kind in one
// namespace, with a subject filter (see Prefix).
type Key struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// KeyOf returns the key of an object.
func KeyOf(gk schema.GroupKind, namespace, name string) Key {
	return Key{Group: gk.Group, Kind: gk.Kind, Namespace: namespace, Name: name}
}

// GroupKind returns the group and kind of the key.
func (k Key) GroupKind() schema.GroupKind { return schema.GroupKind{Group: k.Group, Kind: k.Kind} }

// String returns the key as stored in the bucket.
func (k Key) String() string {
	return escape(k.Group) + "." + escape(k.Kind) + "." + escape(k.Namespace) + "." + escape(k.Name)
}

// errKey is returned for a bucket key that no Key produces.
var errKey = errors.New("not a mirror key")

// ParseKey returns the Key of a bucket key, or an error if no Key has that
// string form.
func ParseKey(s string) (Key, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return Key{}, fmt.Errorf("%w: %q has %d tokens, not 4", errKey, s, len(parts))
	}
	var out [4]string
	for i, p := range parts {
		v, err := unescape(p)
		if err != nil {
			return Key{}, fmt.Errorf("%w: %q: %w", errKey, s, err)
		}
		out[i] = v
	}
	k := Key{Group: out[0], Kind: out[1], Namespace: out[2], Name: out[3]}
	if k.Kind == "" || k.Name == "" {
		return Key{}, fmt.Errorf("%w: %q has no kind or no name", errKey, s)
	}
	if k.String() != s {
		// Each Key has one string form; another spelling is no key of ours.
		return Key{}, fmt.Errorf("%w: %q is not escaped as %q", errKey, s, k.String())
	}
	return k, nil
}

// Prefix returns the subject filter of every key of a kind, or of a kind in
// one namespace when namespace is not empty.
func Prefix(gk schema.GroupKind, namespace string) string {
	p := escape(gk.Group) + "." + escape(gk.Kind) + "."
	if namespace == "" {
		return p + ">"
	}
	return p + escape(namespace) + ".*"
}

// empty is the token of an empty value.
const empty = "_"

func escape(s string) string {
	if s == "" {
		return empty
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case c == '.' && i > 0:
			// Not at the start, so that "." alone does not escape to empty.
			b.WriteByte('_')
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

func unescape(t string) (string, error) {
	if t == empty {
		return "", nil
	}
	if t == "" {
		return "", errors.New("empty token")
	}
	var b strings.Builder
	b.Grow(len(t))
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case '_':
			b.WriteByte('.')
		case '=':
			if i+3 > len(t) {
				return "", fmt.Errorf("truncated escape in %q", t)
			}
			v, err := strconv.ParseUint(t[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("invalid escape in %q: %w", t, err)
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
