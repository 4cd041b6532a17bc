// Package mirror is the object mirror of the state plane: a JetStream
// key-value bucket that holds, as JSON, the full objects the watcher watches,
// so that workers read state from JetStream instead of asking the API server
// again for what the watcher already saw.
//
// The watcher is the one writer (Writer): it puts an object before it
// publishes the event that names it, purges its key when it is deleted, and
// reconciles the bucket with its informers on every resync. Workers read
// (Reader). A reader holds an event that carries the object's
// resourceVersion; the mirror answers with the object and how it compares to
// that version: Fresh (at least as new), Stale (older: the watcher has not
// written the version the event names, or a second watcher wrote an older
// one last) or Unknown (no entry: never seen, deleted, too large to mirror,
// or the mirror was purged). Only Fresh answers replace an API read; a
// missing key never means the object does not exist.
//
// Secrets are never mirrored: Secret data never travels on NATS.
//
// Keys are described on Key. Values are the object's JSON as the API server
// returned it, managedFields included (the server-side apply change check
// reads them), so the value carries its own resourceVersion.
package mirror

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/bus"
)

// Bucket is the name of the mirror's key-value bucket.
const Bucket = "LOOM_MIRROR"

// BucketConfig is the mirror's bucket: file storage (the mirror must survive
// a NATS restart, or every worker falls back to the API server at once), the
// bus's replica count, and one value per key (workers read only the latest).
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Loom's object mirror: the objects the watcher watches, as JSON, by group, kind, namespace and name.",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// EnsureBucket creates the mirror's bucket, or updates an existing one to
// BucketConfig(replicas), and returns it once it has a leader. It retries
// while a cluster elects leaders, until ctx ends; it is safe to call from
// every replica of every service.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return bus.EnsureKeyValue(ctx, js, BucketConfig(replicas))
}

// ErrSecret is returned by Writer.Put for a core/v1 Secret.
var ErrSecret = errors.New("secrets are never mirrored")

// kindSecret is the kind of core Secrets.
var kindSecret = schema.GroupKind{Kind: "Secret"}

// Mirrored reports whether objects of a kind may be mirrored: every kind but
// core Secrets.
func Mirrored(gk schema.GroupKind) bool { return gk != kindSecret }

// State is what the mirror knows of an object, compared with the
// resourceVersion a reader asked for.
type State int

// States of a read.
const (
	// Unknown means the mirror has no entry that can answer: the key was
	// never written or was purged, or the entry holds another version of
	// the kind than the one asked for. The object may exist; read the API
	// server.
	Unknown State = iota
	// Stale means the entry is older than the resourceVersion asked for, or
	// the two cannot be compared. The stale object is returned.
	Stale
	// Fresh means the entry is at least as new as the resourceVersion asked
	// for.
	Fresh
)

func (s State) String() string {
	switch s {
	case Unknown:
		return "Unknown"
	case Stale:
		return "Stale"
	case Fresh:
		return "Fresh"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// AtLeast reports whether resourceVersion have is at least as new as want.
// An empty want asks for nothing in particular: any entry will do.
//
// Kubernetes says resourceVersions are opaque: clients may compare them for
// equality only. Every API server Loom supports stores objects in etcd,
// whose resourceVersions are decimal revisions of one counter that only
// grows, and the API server itself compares them as such (a list with
// resourceVersionMatch=NotOlderThan); so when both parse as unsigned
// integers AtLeast compares them as numbers. Otherwise it falls back to the
// opaque rule: equal is at least as new, anything else cannot be told and is
// not.
func AtLeast(have, want string) bool {
	if want == "" || have == want {
		return true
	}
	h, herr := strconv.ParseUint(have, 10, 64)
	w, werr := strconv.ParseUint(want, 10, 64)
	if herr != nil || werr != nil {
		return false
	}
	return h >= w
}
