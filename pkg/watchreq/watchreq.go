// Package watchreq is the contract between the renderer, which asks for
// objects to be watched on behalf of an XR (for example the extra resources a
// Composition Function marked to watch), and the watcher, which runs the
// watches and publishes a change of a matching object to the renderer with the
// XR as the target.
//
// Requests live in a JetStream key-value bucket named [Bucket]. The key is the
// UID of the requesting XR ([Key]); the value is a JSON array of [Request]s
// ([Encode], [Decode]), for example:
//
//	[{"apiVersion":"apiextensions.crossplane.io/v1beta1","kind":"EnvironmentConfig","matchLabels":{"env":"prod"}},
//	 {"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"settings"}]
//
// The renderer owns the entries: it writes the full list of an XR's requests
// whenever it changes ([Put] skips writes that change nothing) and deletes the
// key when the XR goes away or requests nothing ([Delete]). The watcher only
// reads the bucket. Deleting a key, or writing an empty list, stops the
// watches it asked for once no other XR needs them.
package watchreq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Bucket is the name of the JetStream key-value bucket holding watch requests.
const Bucket = "loom-watches"

// MaxRequests bounds the number of requests one XR may hold, so that one
// misbehaving function cannot make the watcher watch without limit.
const MaxRequests = 256

// Request names the objects one XR wants to be told about. APIVersion and Kind
// are required. Namespace, when set, restricts matches to that namespace;
// Name, when set, to the object of that name; MatchLabels, when set, to
// objects carrying all those labels. Name and MatchLabels are mutually
// exclusive, as they are in Crossplane's resource requirements.
type Request struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Namespace   string            `json:"namespace,omitempty"`
	Name        string            `json:"name,omitempty"`
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// GroupVersionKind returns the kind the request watches. It assumes the
// request is valid.
func (r Request) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithKind(r.Kind)
}

// Matches reports whether an object of the request's kind with the given
// namespace, name and labels is one the request names. The caller checks the
// kind.
func (r Request) Matches(namespace, name string, labels map[string]string) bool {
	if r.Namespace != "" && r.Namespace != namespace {
		return false
	}
	if r.Name != "" && r.Name != name {
		return false
	}
	for k, v := range r.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Validate returns an error naming the first field that is not acceptable.
func (r Request) Validate() error {
	if r.APIVersion == "" {
		return errors.New("apiVersion is required")
	}
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil || gv.Version == "" {
		return fmt.Errorf("apiVersion %q is not of the form [group/]version", r.APIVersion)
	}
	if r.Kind == "" {
		return errors.New("kind is required")
	}
	if strings.ContainsAny(r.Kind, "/. ") {
		return fmt.Errorf("kind %q is not a valid kind", r.Kind)
	}
	if r.Namespace != "" {
		if errs := validation.IsDNS1123Label(r.Namespace); len(errs) > 0 {
			return fmt.Errorf("namespace %q is not valid: %s", r.Namespace, strings.Join(errs, "; "))
		}
	}
	if r.Name != "" && len(r.MatchLabels) > 0 {
		return errors.New("name and matchLabels are mutually exclusive")
	}
	if r.Name != "" && strings.Contains(r.Name, "/") {
		return fmt.Errorf("name %q is not valid: it contains '/'", r.Name)
	}
	for _, k := range sortedKeys(r.MatchLabels) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("matchLabels key %q is not valid: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(r.MatchLabels[k]); len(errs) > 0 {
			return fmt.Errorf("matchLabels[%q] value %q is not valid: %s", k, r.MatchLabels[k], strings.Join(errs, "; "))
		}
	}
	return nil
}

// Encode validates requests and returns their canonical JSON form: sorted,
// without duplicates, so that the same set of requests always encodes to the
// same bytes. It does not modify reqs.
func Encode(reqs []Request) ([]byte, error) {
	if len(reqs) > MaxRequests {
		return nil, fmt.Errorf("cannot encode watch requests: %d requests exceed the limit of %d", len(reqs), MaxRequests)
	}
	out := make([]Request, 0, len(reqs))
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("cannot encode watch request %d: %w", i, err)
		}
		if len(r.MatchLabels) == 0 {
			r.MatchLabels = nil
		}
		out = append(out, r)
	}
	slices.SortFunc(out, compare)
	out = slices.CompactFunc(out, func(a, b Request) bool { return compare(a, b) == 0 })
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("cannot encode watch requests: %w", err)
	}
	return b, nil
}

// Decode parses and validates a bucket value. Unknown fields are an error, so
// that a typo in a writer does not silently widen or narrow a watch. An empty
// value decodes to no requests.
func Decode(b []byte) ([]Request, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var reqs []Request
	if err := dec.Decode(&reqs); err != nil {
		return nil, fmt.Errorf("cannot decode watch requests: %w", err)
	}
	if dec.More() {
		return nil, errors.New("cannot decode watch requests: trailing data after the JSON array")
	}
	if len(reqs) > MaxRequests {
		return nil, fmt.Errorf("cannot decode watch requests: %d requests exceed the limit of %d", len(reqs), MaxRequests)
	}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("cannot decode watch request %d: %w", i, err)
		}
	}
	return reqs, nil
}

// Key returns the bucket key of the requests of the XR with the given UID.
// Kubernetes UIDs are valid keys as they are; Key rejects anything a bucket
// key may not hold.
func Key(xrUID string) (string, error) {
	if xrUID == "" {
		return "", errors.New("the XR's UID is required")
	}
	for _, c := range xrUID {
		if !keyByte(c) {
			return "", fmt.Errorf("UID %q is not a valid watch request key", xrUID)
		}
	}
	return xrUID, nil
}

func compare(a, b Request) int {
	return cmpStrings(
		[]string{a.APIVersion, a.Kind, a.Namespace, a.Name, labelString(a.MatchLabels)},
		[]string{b.APIVersion, b.Kind, b.Namespace, b.Name, labelString(b.MatchLabels)},
	)
}

func cmpStrings(a, b []string) int {
	for i := range a {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// labelString renders labels in a canonical order for comparison. Label keys
// and values cannot contain ',' or '=', so the rendering is unambiguous.
func labelString(l map[string]string) string {
	var sb strings.Builder
	for _, k := range sortedKeys(l) {
		sb.WriteString(k)
		sb.WriteByte('=')
		sb.WriteString(l[k])
		sb.WriteByte(',')
	}
	return sb.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keyByte reports whether c may appear in a key of the bucket: ASCII
// letters, digits, '-' and '_'.
func keyByte(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
