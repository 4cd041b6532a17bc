// Command admission is Loom's admission component: the validating webhooks
// Crossplane v1.20 serves for its API extensions (Compositions are
// validated on their own and against the schemas they patch; objects in use
// by a Usage may not be deleted) and the controller of Usages.
//
// It serves the webhooks over HTTPS with a serving certificate read from
// files (--tls-cert-file, --tls-key-file; renewed files are picked up
// without a restart). Who registers the webhooks decides where their CA
// bundle comes from: the local stack (pkg/stack) issues the certificate and
// registers a ValidatingWebhookConfiguration with a loopback URL; the Helm
// chart generates a CA and the certificate and registers the Service.
//
// It runs as its own ServiceAccount. It does not use the bus: the NATS
// flags are accepted and ignored, so that the local stack and the chart
// start it like the other services.
//
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/services/admission/internal/composition"
	"github.com/loomxr/loom/services/admission/internal/usage"
	"github.com/loomxr/loom/services/admission/internal/webhook"
)

type flags struct {
	webhookAddr string
	certFile    string
	keyFile     string
	kube        service.KubeFlags
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.webhookAddr, "webhook-addr", service.EnvString("LOOM_ADMISSION_WEBHOOK_ADDR", ":9443"),
		"address the webhooks are served on, over HTTPS (env LOOM_ADMISSION_WEBHOOK_ADDR)")
	fs.StringVar(&f.certFile, "tls-cert-file", service.EnvString("LOOM_ADMISSION_TLS_CERT_FILE", "/etc/loom/admission-tls/tls.crt"),
		"PEM serving certificate of the webhooks (env LOOM_ADMISSION_TLS_CERT_FILE)")
	fs.StringVar(&f.keyFile, "tls-key-file", service.EnvString("LOOM_ADMISSION_TLS_KEY_FILE", "/etc/loom/admission-tls/tls.key"),
		"PEM key of the serving certificate (env LOOM_ADMISSION_TLS_KEY_FILE)")
	f.kube.Register(fs, "LOOM_ADMISSION", 20, 40)
}

func main() {
	var f flags
	service.MainWithoutBus("admission", f.run, f.register)
}

// run wires the component from the parsed flags and runs it until ctx ends.
func (f *flags) run(ctx context.Context, rt *service.Runtime) error {
	rc := f.kube.Config(rt.REST)
	ext, err := clientset.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create the CustomResourceDefinition client: %w", err)
	}
	crds, err := composition.NewCRDIndex(ext)
	if err != nil {
		return err
	}
	go crds.Run(ctx)

	kc, err := kube.NewClients(rc)
	if err != nil {
		return err
	}
	objects := kube.NewResources(kc.Dynamic, kc.Mapper)
	usages, err := usage.NewIndex(kc.Dynamic)
	if err != nil {
		return err
	}
	go usages.Run(ctx)
	ctrl := usage.NewController(usages, usage.NewReconciler(objects, usages, rt.Log.With("controller", "usage")), 2, rt.Log)
	go func() {
		if err := ctrl.Run(ctx); err != nil {
			rt.Log.Error("the Usage controller stopped", "err", err)
		}
	}()

	srv := webhook.NewServer(f.webhookAddr, f.certFile, f.keyFile, rt.Log)
	srv.Handle(composition.Path, webhook.Handler(composition.NewValidator(crds), rt.Log))
	srv.Handle(usage.Path, webhook.Handler(usage.NewValidator(usages, objects, rt.Log.With("webhook", "no-usages")), rt.Log))
	if err := srv.Start(ctx); err != nil {
		return err
	}
	rt.AddReadinessCheck("webhooks", func(context.Context) error {
		switch {
		case srv.Addr() == "":
			return errors.New("not serving webhooks yet")
		case !crds.Synced():
			return errors.New("CustomResourceDefinitions not listed yet")
		case !usages.Synced():
			return errors.New("usages not listed yet")
		}
		return nil
	})
	rt.Log.Info("serving webhooks", "addr", srv.Addr())
	<-ctx.Done()
	return nil
}
