// Command binder is Loom's binder service: it binds claims to composite resources and resolves references between composed resources.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
//
// An XRD may name a ServiceAccount (spec.serviceAccountRef): the binder then
// writes the resolved references of its XRs' composed resources while
// impersonating that account (object.Impersonator, one client per account),
// so RBAC decides what may be written; it reads, and writes claims and XRs,
// as itself.
package main

import (
	"context"
	"flag"
	"time"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/pkg/xrd"
	"github.com/loomxr/loom/services/binder/internal/claim"
	"github.com/loomxr/loom/services/binder/internal/object"
	"github.com/loomxr/loom/services/binder/internal/reference"
	"github.com/loomxr/loom/services/binder/internal/route"
)

// flags are the binder's own flags, beyond the standard ones.
type flags struct {
	worker          service.WorkerFlags
	kube            service.KubeFlags
	ruleTTL         time.Duration
	externalPoll    time.Duration
	firstStatusWait time.Duration
	waitGrace       time.Duration
}

func (f *flags) register(fs *flag.FlagSet) {
	f.worker.Register(fs, "LOOM_BINDER", 16)
	f.kube.Register(fs, "LOOM_BINDER", 200, 400)
	fs.DurationVar(&f.ruleTTL, "rule-ttl", service.EnvDuration("LOOM_BINDER_RULE_TTL", time.Minute),
		"how long cached reference rules are used before they are listed again; a rule change reloads them at once (env LOOM_BINDER_RULE_TTL)")
	fs.DurationVar(&f.externalPoll, "external-poll", service.EnvDuration("LOOM_BINDER_EXTERNAL_POLL", 30*time.Second),
		"how long to wait before looking again at a reference that waits for a resource the composite resource does not control (env LOOM_BINDER_EXTERNAL_POLL)")
	fs.DurationVar(&f.firstStatusWait, "first-status-wait", service.EnvDuration("LOOM_BINDER_FIRST_STATUS_WAIT", claim.DefaultFirstStatusWait),
		"how long after its composite resource's creation a claim's first status may wait for the composite resource to be Ready, so that it is written once; 0 writes it at once (env LOOM_BINDER_FIRST_STATUS_WAIT)")
	fs.DurationVar(&f.waitGrace, "reference-wait-grace", service.EnvDuration("LOOM_BINDER_REFERENCE_WAIT_GRACE", reference.DefaultWaitGrace),
		"how long a reference that waits for its target writes nothing (neither the reference nor the composite resource's ReferencesResolved condition), so that a target Ready a moment later costs one write; 0 writes every wait at once (env LOOM_BINDER_REFERENCE_WAIT_GRACE)")
}

func main() {
	var f flags
	service.Main("binder", f.run, f.register)
}

// run wires the service from the parsed flags and runs it until ctx ends.
func (f *flags) run(ctx context.Context, rt *service.Runtime) error {
	b, err := rt.Bus(ctx, f.worker.Bus.Config())
	if err != nil {
		return err
	}

	kc, err := kube.NewClients(f.kube.Config(rt.REST))
	if err != nil {
		return err
	}
	ro, err := b.ReadOptions(ctx, f.worker)
	if err != nil {
		return err
	}
	c := object.New(kc.Dynamic, kc.Metadata, kc.Mapper, claim.FieldManager, ro...)
	imp := object.NewImpersonator(kc.REST, kc.Mapper, claim.FieldManager)
	rec, stop, err := event.StartRecorder(ctx, kc.Kubernetes, claim.FieldManager)
	if err != nil {
		return err
	}
	defer stop()

	defs := xrd.NewIndex(c)
	rules := reference.NewRules(c, f.ruleTTL)
	refOpts := []reference.Option{
		reference.WithLogger(rt.Log), reference.WithRecorder(rec), reference.WithExternalPoll(f.externalPoll), reference.WithWaitGrace(f.waitGrace),
		reference.WithImpersonation(defs, func(user string) (reference.Writer, error) {
			w, err := imp.As(user)
			if err != nil {
				return nil, err
			}
			return w, nil
		}),
	}
	claimOpts := []claim.Option{
		claim.WithLogger(rt.Log), claim.WithRecorder(rec), claim.WithFirstStatusWait(f.firstStatusWait),
		claim.WithCompositions(claim.NewCompositions(c, claim.DefaultCompositionsTTL, claim.DefaultCompositionsSize)),
	}
	if f.worker.Mirror {
		// Reads may lag the API server: confirm a wait before writing it.
		refOpts = append(refOpts, reference.WithConfirmedWaits())
		claimOpts = append(claimOpts, claim.WithConfirmedWaits())
	}
	h := route.NewHandler(defs,
		claim.NewReconciler(c, defs, claimOpts...),
		reference.NewReconciler(c, rules, refOpts...),
		reference.NewFanOut(rules, c, b.Publisher, bus.Binder),
		rt.Log,
	)
	opts, err := f.worker.Options()
	if err != nil {
		return err
	}
	w, err := b.Worker(h, opts...)
	if err != nil {
		return err
	}
	rt.Log.Info("ready")
	return w.Run(ctx)
}
