// Command renderer is Loom's renderer service: it renders composite resources through their Compositions into composed resources.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/:
//
//	route       the bus handler: dispatch by the target's kind
//	definition  XRDs: CRDs of XRs and claims, Established/Offered, deletion
//	revision    Compositions: numbered CompositionRevisions, requeue of XRs
//	composite   XRs: selection, render (P&T or functions), apply, status
//	function    loom.dev Function endpoints, extra resources for functions
//	secret      Secret get (credentials, TLS material, connection details)
//	connection  hands Pipeline XRs' connection details to the secrets service
//	kube        the API client, and accounting of every request
//	event       Kubernetes Events, only when something happened
//
// # Decisions
//
// Fan-out. The watcher routes a Composition's and its revisions' changes to
// the Composition, not to the XRs using it, so the renderer fans out: when a
// revision is created or renumbered, it lists the XRs of the Composition's
// kind (one paged LIST) and publishes a REQUEUE for each that uses the
// Composition under the Automatic policy and is not on the latest revision
// its selector allows, naming that revision, and for each that has no
// Composition yet. Resyncs of unchanged Compositions list nothing. An
// EnvironmentConfig change needs no fan-out: an XR that reads one asks the
// watcher (package watchreq) to route its changes to the XR directly.
//
// Composition choice. Where Crossplane picks one of several Compositions a
// selector matches at random, Loom picks by rendezvous hashing of the XR's
// UID and the names: deterministic, even, and stable when Compositions come
// and go (see composite.Choose).
//
// RBAC. The renderer's role is exact (deploy/helm/loom/files/rbac/
// renderer.yaml): Secrets get only, CRDs create/update/patch/delete, no
// watch or list of composed kinds. Its rights on XR, claim and composed
// kinds come from ClusterRoles labelled loom.dev/aggregate-to-renderer: the
// RBAC manager (services/rbac-manager) writes those of every XRD's kinds,
// providers' installers those of composed kinds. The renderer never writes
// RBAC: that would need the escalate verb, which would let it grant itself
// anything.
//
// Service accounts. An XRD may name a ServiceAccount (spec.serviceAccountRef);
// the renderer then creates, updates and deletes the composed resources of
// its XRs while impersonating it, through one client per account, kept for
// the life of the process (kube.Impersonator), so that RBAC decides which
// kinds those XRs may be composed of. It reads them, and writes the XRs, as
// itself. A write the account may not make is reported on the XR's Synced
// condition, naming the account, the verb and the resource; the XR's other
// composed resources are still applied.
//
// API economy. Every write is skipped when the cluster already holds it
// (managed-fields comparison, package apply), so re-rendering an unchanged
// XR makes no write. A first render of an XR with three composed resources
// makes five writes (one spec patch with the selection refs and
// resourceRefs, three applies, one status apply) and about six reads; each
// later render reads the XR and its composed resources (GET, never LIST)
// and writes the status only when it changed. Events are emitted for new
// errors, real Composition choices, revisions and deleted resources, not
// for routine renders. Client-side rate limits: --kube-qps 200,
// --kube-burst 400; renders at once: --concurrency 32.
//
// Connection details. The connection details that the functions of a
// Pipeline XR return for it are handed, after each render that changed
// them, to the secrets service over gRPC with mutual TLS (package
// connection; the secrets service alone writes Secrets, and Secret values
// never travel on the bus):
//
//	--secrets-endpoint       host:port of the secrets service's endpoint, or
//	                         several, comma-separated (used round robin);
//	                         empty: XRs whose functions return connection
//	                         details fail with a Synced condition naming this
//	                         flag (env LOOM_RENDERER_SECRETS_ENDPOINT)
//	--secrets-tls-cert-file  PEM client certificate, whose common name or DNS
//	                         name the secrets service allows (loom-renderer)
//	                         (env LOOM_RENDERER_SECRETS_TLS_CERT_FILE)
//	--secrets-tls-key-file   its PEM key (env LOOM_RENDERER_SECRETS_TLS_KEY_FILE)
//	--secrets-ca-file        PEM CA(s) of the secrets service's certificate
//	                         (env LOOM_RENDERER_SECRETS_CA_FILE)
//	--secrets-server-name    name the secrets service's certificate must hold;
//	                         default the host of the first endpoint (env
//	                         LOOM_RENDERER_SECRETS_SERVER_NAME)
//
// The files are read once at start.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/loomxr/loom/pkg/bus"
	kitevent "github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/fn"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/pkg/xrd"
	"github.com/loomxr/loom/services/renderer/internal/composite"
	"github.com/loomxr/loom/services/renderer/internal/connection"
	"github.com/loomxr/loom/services/renderer/internal/definition"
	"github.com/loomxr/loom/services/renderer/internal/event"
	"github.com/loomxr/loom/services/renderer/internal/function"
	"github.com/loomxr/loom/services/renderer/internal/kube"
	"github.com/loomxr/loom/services/renderer/internal/revision"
	"github.com/loomxr/loom/services/renderer/internal/route"
	"github.com/loomxr/loom/services/renderer/internal/secret"
)

// flags are the renderer's own flags, beyond the standard ones.
type flags struct {
	worker         service.WorkerFlags
	kube           service.KubeFlags
	handlerTimeout time.Duration
	definitionTTL  time.Duration
	revisionTTL    time.Duration
	functionTTL    time.Duration
	functionTimout time.Duration
	apiReport      time.Duration
	// secretsEndpoint and secrets say how to reach the secrets service.
	secretsEndpoint string
	secrets         connection.Config
	memoSize        int
	firstStatusWait time.Duration
	unobservedWait  time.Duration
	publicationWait time.Duration
	admissionLimit  int
}

func (f *flags) register(fs *flag.FlagSet) {
	f.worker.Register(fs, "LOOM_RENDERER", 32)
	f.kube.Register(fs, "LOOM_RENDERER", 200, 400)
	fs.IntVar(&f.memoSize, "memo-size", service.EnvInt("LOOM_RENDERER_MEMO_SIZE", composite.DefaultMemoSize),
		"XRs whose last watch requests and function results this replica remembers; beyond it the least recently rendered are checked again (env LOOM_RENDERER_MEMO_SIZE)")
	fs.DurationVar(&f.firstStatusWait, "first-status-wait", service.EnvDuration("LOOM_RENDERER_FIRST_STATUS_WAIT", composite.DefaultFirstStatusWait),
		"how long after its creation a composite resource's first status may wait for the composite resource to be Ready, so that it is written once; 0 writes it at once (env LOOM_RENDERER_FIRST_STATUS_WAIT)")
	fs.DurationVar(&f.unobservedWait, "unobserved-wait", service.EnvDuration("LOOM_RENDERER_UNOBSERVED_WAIT", composite.DefaultUnobservedWait),
		"how long after its composed resources' creation a composite resource's first status may wait, beyond --first-status-wait, while one of them that is not Ready has no status yet (its provider has not looked at it); 0: no longer than --first-status-wait (env LOOM_RENDERER_UNOBSERVED_WAIT)")
	fs.DurationVar(&f.publicationWait, "publication-wait", service.EnvDuration("LOOM_RENDERER_PUBLICATION_WAIT", composite.DefaultPublicationWait),
		"how long after its last composed resource turned Ready a composite resource's Ready status may wait for the first publication of its connection Secret, so that both are written at once; 0 writes Ready at once (env LOOM_RENDERER_PUBLICATION_WAIT)")
	fs.IntVar(&f.admissionLimit, "admission-limit", service.EnvInt("LOOM_RENDERER_ADMISSION_LIMIT", composite.DefaultAdmissionLimit),
		"composed resources one tenant (--fair-key) may have on this replica that their providers have not looked at yet; beyond it, renders that would create more wait, in order, holding no slot, so that one tenant's bulk does not fill the providers' queues ahead of another's new claim; 0: no bound (env LOOM_RENDERER_ADMISSION_LIMIT)")
	fs.DurationVar(&f.handlerTimeout, "handler-timeout", service.EnvDuration("LOOM_RENDERER_HANDLER_TIMEOUT", 2*time.Minute),
		"longest one render may take, function pipeline included (env LOOM_RENDERER_HANDLER_TIMEOUT)")
	fs.DurationVar(&f.definitionTTL, "definition-ttl", service.EnvDuration("LOOM_RENDERER_DEFINITION_TTL", 30*time.Second),
		"how long the index of XRDs is used before it is listed again; a change of an XRD reloads it at once on the replica handling it (env LOOM_RENDERER_DEFINITION_TTL)")
	fs.DurationVar(&f.revisionTTL, "revision-ttl", service.EnvDuration("LOOM_RENDERER_REVISION_TTL", 10*time.Second),
		"how long a Composition's revisions are cached; a render asked for a revision the cache lacks reads them afresh (env LOOM_RENDERER_REVISION_TTL)")
	fs.DurationVar(&f.functionTTL, "function-ttl", service.EnvDuration("LOOM_RENDERER_FUNCTION_TTL", 30*time.Second),
		"how long a loom.dev Function's endpoint and TLS material are cached (env LOOM_RENDERER_FUNCTION_TTL)")
	fs.DurationVar(&f.functionTimout, "function-timeout", service.EnvDuration("LOOM_RENDERER_FUNCTION_TIMEOUT", fn.DefaultTimeout),
		"timeout of one function call unless its Function sets one (env LOOM_RENDERER_FUNCTION_TIMEOUT)")
	fs.DurationVar(&f.apiReport, "api-report", service.EnvDuration("LOOM_RENDERER_API_REPORT", time.Minute),
		"how often to log the number of API requests made so far, when it changed; 0 disables (env LOOM_RENDERER_API_REPORT)")
	fs.StringVar(&f.secretsEndpoint, "secrets-endpoint", os.Getenv("LOOM_RENDERER_SECRETS_ENDPOINT"),
		"host:port of the secrets service's gRPC endpoint (mutual TLS), or several comma-separated; it receives the connection details that functions return for Pipeline XRs (env LOOM_RENDERER_SECRETS_ENDPOINT)")
	fs.StringVar(&f.secrets.CertFile, "secrets-tls-cert-file", os.Getenv("LOOM_RENDERER_SECRETS_TLS_CERT_FILE"),
		"PEM client certificate for the secrets service (env LOOM_RENDERER_SECRETS_TLS_CERT_FILE)")
	fs.StringVar(&f.secrets.KeyFile, "secrets-tls-key-file", os.Getenv("LOOM_RENDERER_SECRETS_TLS_KEY_FILE"),
		"PEM key of the client certificate (env LOOM_RENDERER_SECRETS_TLS_KEY_FILE)")
	fs.StringVar(&f.secrets.CAFile, "secrets-ca-file", os.Getenv("LOOM_RENDERER_SECRETS_CA_FILE"),
		"PEM CA certificates of the secrets service's certificate (env LOOM_RENDERER_SECRETS_CA_FILE)")
	fs.StringVar(&f.secrets.ServerName, "secrets-server-name", os.Getenv("LOOM_RENDERER_SECRETS_SERVER_NAME"),
		"name the secrets service's certificate must hold; default the host of the first endpoint (env LOOM_RENDERER_SECRETS_SERVER_NAME)")
}

// splitList splits a comma-separated list, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func main() {
	var f flags
	service.Main("renderer", f.run, f.register)
}

// run wires the service from the parsed flags and runs it until ctx ends.
func (f *flags) run(ctx context.Context, rt *service.Runtime) error {
	b, err := rt.Bus(ctx, f.worker.Bus.Config())
	if err != nil {
		return err
	}
	kv, err := b.WatchRequests(ctx)
	if err != nil {
		return err
	}

	total := &kube.Tally{}
	rc := f.kube.Config(rt.REST)
	rc.Wrap(kube.Count(total))
	kc, err := kitkube.NewClients(rc)
	if err != nil {
		return err
	}
	ro, err := b.ReadOptions(ctx, f.worker)
	if err != nil {
		return err
	}
	client := kube.New(kc.Dynamic, kc.Mapper, ro...)
	imp := kube.NewImpersonator(kc.REST, kc.Mapper)
	api, stop, err := kitevent.StartRecorder(ctx, kc.Kubernetes, kube.FieldManager)
	if err != nil {
		return err
	}
	defer stop()
	var rec event.Recorder = api.WithActions()

	index := xrd.NewIndex(client, xrd.WithTTL(f.definitionTTL))
	secrets := secret.NewReader(client)
	resolver := function.NewResolver(client, secrets, f.functionTTL)
	fnClient := fn.NewClient(resolver, fn.WithDefaultTimeout(f.functionTimout))
	defer func() { _ = fnClient.Close() }()
	exec := fn.NewExecutor(fn.NewCache(fnClient),
		fn.WithResourceFetcher(function.NewFetcher(client)),
		fn.WithCredentialFetcher(secrets))
	store := revision.NewStore(client, f.revisionTTL)
	copts := []composite.Option{
		composite.WithMemoSize(f.memoSize), composite.WithFirstStatusWait(f.firstStatusWait), composite.WithUnobservedWait(f.unobservedWait), composite.WithPublicationWait(f.publicationWait),
		composite.WithPipeline(exec), composite.WithWatches(composite.KVWatches{KV: kv}), composite.WithSecrets(secrets),
		composite.WithRecorder(rec), composite.WithLogger(rt.Log),
		composite.WithImpersonation(func(user string) (composite.Client, error) {
			c, err := imp.As(user)
			if err != nil {
				return nil, err
			}
			return c, nil
		}),
	}
	var admission *composite.Admission
	if f.admissionLimit > 0 {
		tenant, err := f.worker.Scheduling.Tenant()
		if err != nil {
			return err
		}
		expiry := f.unobservedWait
		if expiry <= 0 {
			expiry = composite.DefaultUnobservedWait
		}
		admission = composite.NewAdmission(f.admissionLimit, expiry)
		if err := admission.Instrument(otel.Meter("github.com/loomxr/loom/services/renderer")); err != nil {
			return fmt.Errorf("cannot instrument the admission of composed resources: %w", err)
		}
		copts = append(copts, composite.WithAdmission(admission, tenant))
	}
	if f.secrets.Endpoints = splitList(f.secretsEndpoint); len(f.secrets.Endpoints) > 0 {
		c, err := connection.Dial(f.secrets)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		copts = append(copts, composite.WithConnectionDetails(connection.NewPublisher(c)))
	} else {
		rt.Log.Info("no --secrets-endpoint: connection details that functions return for Pipeline XRs cannot be published")
	}

	h := route.NewHandler(index,
		definition.NewReconciler(client, index,
			definition.WithRecorder(rec), definition.WithLogger(rt.Log)),
		revision.NewReconciler(client, store, index, b.Publisher, bus.Renderer,
			revision.WithRecorder(rec), revision.WithLogger(rt.Log), revision.WithSource(b.Source)),
		composite.NewReconciler(client, index, store, copts...),
		resolver, rt.Log)
	opts, err := f.worker.Options()
	if err != nil {
		return err
	}
	w, err := b.Worker(h, append(opts, bus.WithHandlerTimeout(f.handlerTimeout), bus.WithArrivals(admission.Arrived))...)
	if err != nil {
		return err
	}
	if f.apiReport > 0 {
		go reportAPI(ctx, rt, total, f.apiReport)
	}
	rt.Log.Info("ready", "concurrency", f.worker.Concurrency, "kubeQPS", f.kube.QPS, "kubeBurst", f.kube.Burst)
	return w.Run(ctx)
}

// reportAPI logs the renderer's API requests so far every interval, when
// they changed.
func reportAPI(ctx context.Context, rt *service.Runtime, total *kube.Tally, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var reads, writes int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, w := total.Reads(), total.Writes()
		if r != reads || w != writes {
			rt.Log.Info("API requests so far", "reads", r, "writes", w)
			reads, writes = r, w
		}
	}
}
