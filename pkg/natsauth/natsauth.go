// Package natsauth defines who may do what on Loom's NATS bus: one NATS user
// per service, each allowed exactly the subjects its work needs, and an
// administrator for operators' tools (loomctl dlq, tests).
//
// The same permissions are enforced by the embedded NATS server of the local
// stack (pkg/stack) and, in production, by the NATS servers installed with the
// official NATS chart (deploy/helm/loom/values-nats-cluster.yaml, which a test
// keeps equal to For). The end-to-end tests run every service under its own
// user, so they prove the permissions are sufficient.
//
// # What each service may do
//
// The watcher publishes events to the work streams of the renderer, binder and
// secrets services, and reads the watch-request bucket the renderer writes. It
// consumes nothing and cannot dead-letter.
//
// A worker (renderer, binder, secrets) consumes its own work stream
// LOOM_<SERVICE> (pull requests and acknowledgements on its own consumers
// only), publishes to its own work subjects (requeues and fan-out) and to its
// own dead-letter subject loom.dlq.<service>, and reads and writes only its
// own keys in the members and leases buckets. The renderer also writes the
// watch-request bucket. No worker can pull from or acknowledge on another
// service's stream, and only one publishes to another's: the secrets
// service publishes render requests to the renderer's work subjects
// (loom.renderer.>), naming Pipeline XRs whose composed resources'
// connection Secrets changed, because their functions observe those
// Secrets and only the secrets service may watch them. Like every event,
// such a request names objects and never carries secret data.
//
// Every service also creates or updates, at start, the JetStream objects of
// the bus (bus.EnsureStreams creates all work streams, their consumers, the
// dead-letter stream and the buckets, from whichever service starts first).
// So each service may call the stream and consumer create, update and info
// APIs of Loom's own streams. Those calls cannot read or move messages; they
// can change configurations, which is the residual right a compromised
// service keeps. Stream deletion, purge and message deletion are never
// granted.
//
// Replies reach a client on its own inbox prefix (InboxPrefix), so one
// service cannot subscribe to the replies, pulled messages included, meant
// for another. Clients must connect with nats.CustomInboxPrefix(InboxPrefix(service)).
package natsauth

import (
	"fmt"
	"slices"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/watchreq"
)

// Watcher is the name of the publishing service; bus.Services are the
// consuming ones.
const Watcher = "watcher"

// Services lists every service with its own NATS identity, in a fixed order.
var Services = []string{Watcher, bus.Renderer, bus.Binder, bus.Secrets} //nolint:gochecknoglobals // Treated as a constant.

// AdminUser is the user of operators' tools; it may do anything.
const AdminUser = "loom-admin"

// User returns the NATS user name of a service: loom-<service>.
func User(service string) string { return "loom-" + service }

// InboxPrefix returns the inbox prefix a service's connection must use:
// _INBOX_<service>. Its users may subscribe only below it.
func InboxPrefix(service string) string { return "_INBOX_" + service }

// Permissions are the subjects a user may publish and subscribe to. Only
// what is listed is allowed; an empty list allows nothing.
type Permissions struct {
	// Publish lists the subjects (wildcards allowed) the user may publish
	// to, JetStream API requests and acknowledgements included.
	Publish []string `json:"publish"`
	// Subscribe lists the subjects the user may subscribe to.
	Subscribe []string `json:"subscribe"`
}

// For returns the permissions of a service, or an error if the service has
// no identity. The lists are sorted and free of duplicates; every call
// returns new slices.
func For(service string) (Permissions, error) {
	var p permissions
	switch service {
	case Watcher:
		p.setup(bus.Services...)
		p.setupBucket(watchreq.Bucket)
		for _, s := range bus.Services {
			p.pub(workSubjects(s))
		}
		p.watchBucket(watchreq.Bucket, ">")
		// The object mirror (watcher --mirror): the watcher alone writes
		// it, lists its keys and drops its old delete markers.
		p.setupBucket(mirror.Bucket)
		p.writeBucket(mirror.Bucket, ">")
		p.watchBucket(mirror.Bucket, ">")
		p.pub(api + "STREAM.PURGE." + kvStream(mirror.Bucket))
	case bus.Renderer, bus.Binder, bus.Secrets:
		p.setup(bus.Services...)
		p.worker(service)
		// Workers read the object mirror (--mirror): get, and list a kind.
		p.setupBucket(mirror.Bucket)
		p.watchBucket(mirror.Bucket, ">")
		if service == bus.Renderer {
			p.setupBucket(watchreq.Bucket)
			p.writeBucket(watchreq.Bucket, ">")
		}
		if service == bus.Secrets {
			p.pub(workSubjects(bus.Renderer))
		}
	default:
		return Permissions{}, fmt.Errorf("cannot authorize NATS user for %q: not a Loom service (want one of %v)", service, Services)
	}
	p.sub(InboxPrefix(service) + ".>")
	return p.done(), nil
}

// permissions accumulates the subjects of one user.
type permissions struct{ publish, subscribe []string }

func (p *permissions) pub(s ...string) { p.publish = append(p.publish, s...) }
func (p *permissions) sub(s ...string) { p.subscribe = append(p.subscribe, s...) }

func (p *permissions) done() Permissions {
	slices.Sort(p.publish)
	slices.Sort(p.subscribe)
	return Permissions{Publish: slices.Compact(p.publish), Subscribe: slices.Compact(p.subscribe)}
}

// JetStream API subjects. Consumer creation carries the filter subject as
// its last tokens ($JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter>), so
// the filter can be constrained too.
const (
	api = "$JS.API."
)

// workSubjects are the subjects of a service's work stream.
func workSubjects(service string) string { return "loom." + service + ".>" }

// kvStream is the stream behind a key-value bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// setup allows creating, updating and reading the configuration of the
// bus's JetStream objects (bus.EnsureStreams): the work streams of services
// and their partition consumers, the dead-letter stream, and the members and
// leases buckets.
func (p *permissions) setup(services ...string) {
	for _, s := range services {
		stream := bus.StreamName(s)
		p.streamAdmin(stream)
		// Partition consumers <service>-pNN filtered to loom.<service>.<p>.*,
		// <service>-pNN-urgent to loom.<service>.<p>.*.urgent,
		// <service>-pNN-resync to loom.<service>.<p>.*.resync and
		// <service>-pNN-overflow to loom.<service>.<p>.*.overflow.
		p.pub(api + "CONSUMER.CREATE." + stream + ".*.loom." + s + ".*.*")
		p.pub(api + "CONSUMER.CREATE." + stream + ".*.loom." + s + ".*.*.urgent")
		p.pub(api + "CONSUMER.CREATE." + stream + ".*.loom." + s + ".*.*.resync")
		p.pub(api + "CONSUMER.CREATE." + stream + ".*.loom." + s + ".*.*.overflow")
	}
	p.streamAdmin(bus.DeadLetterStream)
	// Creating a key-value bucket reads the account's JetStream limits.
	p.pub(api + "INFO")
	p.setupBucket(bus.MembersBucket)
	p.setupBucket(bus.LeasesBucket)
}

// setupBucket allows creating a key-value bucket and reading its
// configuration.
func (p *permissions) setupBucket(bucket string) { p.streamAdmin(kvStream(bucket)) }

// streamAdmin allows creating and updating a stream and reading its
// configuration and state; never deleting or purging it.
func (p *permissions) streamAdmin(stream string) {
	p.pub(api+"STREAM.CREATE."+stream, api+"STREAM.UPDATE."+stream, api+"STREAM.INFO."+stream)
}

// worker allows consuming a service's own work stream, publishing requeues
// and dead letters, and its membership and leases.
func (p *permissions) worker(service string) {
	stream := bus.StreamName(service)
	p.pub(
		workSubjects(service),                // requeues, fan-out to its own targets
		bus.DeadLetterSubject(service),       // dead letters
		api+"CONSUMER.INFO."+stream+".*",     // bind to a partition consumer
		api+"CONSUMER.MSG.NEXT."+stream+".*", // pull
		"$JS.ACK."+stream+".>",               // ack, nak, in progress, term
	)
	p.writeBucket(bus.MembersBucket, service+".>")
	p.writeBucket(bus.LeasesBucket, service+".>")
	p.watchBucket(bus.MembersBucket, service+".>")
	p.watchBucket(bus.LeasesBucket, service+".>")
}

// writeBucket allows putting, deleting and getting the keys matching keys
// (a subject pattern) in a bucket.
func (p *permissions) writeBucket(bucket, keys string) {
	p.pub("$KV." + bucket + "." + keys)
	p.readBucket(bucket, keys)
}

// readBucket allows getting the keys matching keys: direct gets name the
// key in the subject; plain message gets (for buckets without direct get)
// cannot be constrained to keys.
func (p *permissions) readBucket(bucket, keys string) {
	stream := kvStream(bucket)
	p.pub(api+"DIRECT.GET."+stream+".$KV."+bucket+"."+keys, api+"STREAM.MSG.GET."+stream)
}

// watchBucket allows watching the keys matching keys: an ordered push
// consumer filtered to them, its deletion, and its flow control replies.
func (p *permissions) watchBucket(bucket, keys string) {
	stream := kvStream(bucket)
	p.pub(
		api+"CONSUMER.CREATE."+stream+".*.$KV."+bucket+"."+keys,
		api+"CONSUMER.DELETE."+stream+".*",
		"$JS.FC."+stream+".>",
	)
	p.readBucket(bucket, keys)
}
