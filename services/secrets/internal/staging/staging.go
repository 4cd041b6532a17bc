// Package staging receives the connection details that the composition
// functions of a Pipeline-mode composite resource (XR) return, and keeps
// them until the XR's connection Secret is built from them.
//
// In Crossplane v1 the connection details of a Pipeline XR are exactly what
// its function pipeline returns for it (desired.composite.connection_details).
// Loom's renderer runs the pipeline, but may not write Secrets, and Secret
// values may not travel on the bus. So the renderer calls this service's
// gRPC endpoint (proto/secrets/v1 ConnectionDetails.Publish) over mutual
// TLS, and the Server stores the details in the XR's staging Secret:
//
//	namespace  the secrets service's own (--namespace)
//	name       loom-fn-<XR UID>
//	type       connection.crossplane.io/v1alpha1
//	labels     loom.dev/composite-uid: <XR UID>,
//	           app.kubernetes.io/managed-by: loom-secrets
//	owner      the XR (controller), so the garbage collector deletes it
//	           with the XR
//
// A staging Secret is durable (any replica may receive a Publish, and a
// restart loses nothing) and written only when its data changes: publishing
// the same details again, as a restarted renderer does once per XR, costs
// one read and no write. After a write the Server requeues the XR on the secrets work
// stream (the event names the XR and the staging Secret, never values); the
// replica that owns the XR builds its connection Secret from the staging
// Secret (package composite), filtered by the XRD's connectionSecretKeys,
// and copies it to the claim. The tracker's watch of connection Secrets sees
// staging Secrets too, so a change made behind the Server's back (or a
// requeue that was lost) still reaches the XR.
//
// Only the identity the service is configured with (the renderer's
// certificate, by common name or DNS name) may call the endpoint; any other
// client with a certificate of the trusted CA gets PermissionDenied.
package staging

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	secretsv1 "github.com/loomxr/loom/proto/secrets/v1"
	"github.com/loomxr/loom/services/secrets/internal/secret"
)

// LabelComposite marks a staging Secret with the UID of its XR.
const LabelComposite = "loom.dev/composite-uid"

// DefaultNamespace is where staging Secrets live unless configured
// otherwise: the namespace Loom is installed in by default.
const DefaultNamespace = "loom-system"

// DefaultClientIdentity is the identity (certificate common name or DNS
// name) of the renderer, the only client of the endpoint.
const DefaultClientIdentity = "loom-renderer"

// Key returns the staging Secret of the XR with the given UID in namespace.
func Key(namespace string, uid types.UID) secret.Key {
	return secret.Key{Namespace: namespace, Name: "loom-fn-" + string(uid)}
}

// A Store writes Secrets (see secret.Store). The Server needs a Store of its
// own, not the one whose writes the tracker ignores (a staging Secret's
// change must requeue its XR), over a ReadThrough cache.
type Store interface {
	Ensure(ctx context.Context, d secret.Desired) (bool, error)
}

// ReadThrough wraps the metadata cache of the Store that writes staging
// Secrets so that the Store never takes what it last wrote for the current
// content without reading it: the renderer spreads its calls over the
// replicas, so several replicas write one XR's staging Secret in turn, and a
// replica whose cache still shows its own last write must not answer
// "unchanged" to details another replica has since replaced. Publishing
// unchanged details then costs one read and no write.
func ReadThrough(c secret.Cache) secret.Cache { return readThrough{c} }

type readThrough struct{ secret.Cache }

// Metadata returns the cached metadata without its resourceVersion, which
// never matches a Store's memory.
func (r readThrough) Metadata(k secret.Key) (*metav1.PartialObjectMetadata, bool) {
	m, ok := r.Cache.Metadata(k)
	if !ok {
		return nil, false
	}
	m = m.DeepCopy()
	m.ResourceVersion = ""
	return m, true
}

// A Publisher publishes events on the bus (see bus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, service string, ev *eventsv1.Event) error
}

// Server serves ConnectionDetails. It is safe for concurrent use.
type Server struct {
	secretsv1.UnimplementedConnectionDetailsServer

	store     Store
	pub       Publisher
	service   string
	namespace string
	log       *slog.Logger
	source    string

	// locks serialise the Publish calls of one XR within this replica; a
	// concurrent write from another replica fails the resourceVersion
	// precondition instead (ABORTED, which the renderer retries).
	locks [64]sync.Mutex
}

// An Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithSource sets the Source of the requeue events the Server publishes.
func WithSource(src string) Option { return func(s *Server) { s.source = src } }

// NewServer returns a Server that keeps staging Secrets in namespace
// through store and requeues their XRs through pub, on service's (the
// secrets service's) work stream.
func NewServer(store Store, pub Publisher, service, namespace string, o ...Option) *Server {
	s := &Server{store: store, pub: pub, service: service, namespace: namespace, log: slog.Default()}
	for _, fn := range o {
		fn(s)
	}
	return s
}

var _ secretsv1.ConnectionDetailsServer = (*Server)(nil)

// uidPattern accepts what can be both a label value and part of a Secret
// name: Kubernetes UIDs are lower-case hexadecimal digits and dashes.
var uidPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,53}[a-z0-9])?$`)

// Publish stores the XR's connection details in its staging Secret, whole,
// and requeues the XR when they changed. See secretsv1.ConnectionDetailsServer.
func (s *Server) Publish(ctx context.Context, req *secretsv1.PublishRequest) (*secretsv1.PublishResponse, error) {
	xr := req.GetComposite()
	gv, err := schema.ParseGroupVersion(xr.GetApiVersion())
	switch {
	case err != nil || xr.GetApiVersion() == "":
		return nil, status.Errorf(codes.InvalidArgument, "composite.api_version %q is not a valid API version", xr.GetApiVersion())
	case xr.GetKind() == "" || xr.GetName() == "":
		return nil, status.Error(codes.InvalidArgument, "composite.kind and composite.name are required")
	case !uidPattern.MatchString(xr.GetUid()):
		return nil, status.Errorf(codes.InvalidArgument, "composite.uid %q is not a Kubernetes UID", xr.GetUid())
	}
	uid := types.UID(xr.GetUid())
	l := &s.locks[lockOf(uid)]
	l.Lock()
	defer l.Unlock()

	k := Key(s.namespace, uid)
	yes := true
	changed, err := s.store.Ensure(ctx, secret.Desired{
		Key:    k,
		Owner:  metav1.OwnerReference{APIVersion: xr.GetApiVersion(), Kind: xr.GetKind(), Name: xr.GetName(), UID: uid, Controller: &yes},
		Data:   req.GetConnectionDetails(),
		Labels: map[string]string{LabelComposite: string(uid)},
	})
	// Key names at most: never values.
	keys := slices.Sorted(maps.Keys(req.GetConnectionDetails()))
	s.log.Debug("Stored connection details returned by composition functions", "kind", xr.GetKind(), "name", xr.GetName(),
		"revision", req.GetCompositionRevision(), "keys", keys, "changed", changed, "err", err)
	if err != nil {
		return nil, statusOf(fmt.Errorf("cannot store the connection details of %s %q: %w", xr.GetKind(), xr.GetName(), err))
	}
	if changed {
		s.requeue(ctx, gv.WithKind(xr.GetKind()), xr.GetName(), uid, k)
	}
	return &secretsv1.PublishResponse{Changed: changed}, nil
}

// requeue asks the replica that owns the XR to build its connection Secret
// again. A failure is only logged: the details are stored, and the
// tracker's watch of the staging Secret requeues the XR too.
func (s *Server) requeue(ctx context.Context, gvk schema.GroupVersionKind, name string, uid types.UID, k secret.Key) {
	ev := &eventsv1.Event{
		Object: &eventsv1.ObjectRef{Version: "v1", Kind: "Secret", Namespace: k.Namespace, Name: k.Name},
		Type:   eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Target: &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: name, Uid: string(uid)},
		Reason: "connection details returned by composition functions changed",
		Source: s.source,
	}
	if err := s.pub.Publish(ctx, s.service, ev); err != nil {
		s.log.Info("Cannot requeue composite resource after its function connection details changed", "kind", gvk.Kind, "name", name, "err", err)
	}
}

// statusOf maps a storage failure to a gRPC status the renderer can act on.
func statusOf(err error) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case kerrors.IsInvalid(err) || kerrors.IsBadRequest(err) || kerrors.IsRequestEntityTooLargeError(err):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, secret.ErrNotControllable):
		return status.Error(codes.FailedPrecondition, err.Error())
	case kerrors.IsConflict(err) || kerrors.IsAlreadyExists(err):
		return status.Error(codes.Aborted, err.Error())
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}

func lockOf(uid types.UID) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return int(h.Sum32() % 64)
}

// ServerTLS returns the TLS configuration of the endpoint: the server
// certificate and key (PEM files), and mutual TLS with client certificates
// signed by a CA of clientCAFile. The files are read once, now.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load the server certificate: %w", err)
	}
	pem, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read the client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cannot read the client CA: %s holds no PEM certificate", clientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// Authorize returns an interceptor that lets through only clients whose
// verified certificate has identity as its common name or as a DNS name,
// and refuses others with PermissionDenied.
func Authorize(identity string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := authorized(ctx, identity); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

func authorized(ctx context.Context, identity string) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "no peer")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return status.Error(codes.PermissionDenied, "no verified client certificate")
	}
	leaf := ti.State.VerifiedChains[0][0]
	if leaf.Subject.CommonName == identity || slices.Contains(leaf.DNSNames, identity) {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "client certificate %q is not %q", leaf.Subject.CommonName, identity)
}

// NewGRPCServer returns a gRPC server that serves s over tlsConfig (see
// ServerTLS) to the client identity only (see Authorize).
func NewGRPCServer(s *Server, tlsConfig *tls.Config, identity string) *grpc.Server {
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsConfig)), grpc.ChainUnaryInterceptor(Authorize(identity)))
	secretsv1.RegisterConnectionDetailsServer(g, s)
	return g
}
