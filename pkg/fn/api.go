package fn

import (
	"context"
	"encoding/json"
	"fmt"

	xpv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/watchreq"
)

// StepsFromPipeline converts a Composition's spec.pipeline into Steps. It
// keeps the difference between an unset allowedExtraResources (no limit) and
// an empty one (nothing allowed).
func StepsFromPipeline(pipeline []xpv1.PipelineStep) ([]Step, error) {
	out := make([]Step, 0, len(pipeline))
	for _, p := range pipeline {
		s := Step{Name: p.Step, Function: p.FunctionRef.Name}
		if p.Input != nil {
			s.Input = p.Input.Raw
			if s.Input == nil && p.Input.Object != nil {
				b, err := json.Marshal(p.Input.Object)
				if err != nil {
					return nil, fmt.Errorf("cannot encode input of pipeline step %q: %w", p.Step, err)
				}
				s.Input = b
			}
		}
		for _, c := range p.Credentials {
			cr := Credential{Name: c.Name, Source: CredentialSource(c.Source)}
			if c.SecretRef != nil {
				cr.SecretRef = &SecretRef{Namespace: c.SecretRef.Namespace, Name: c.SecretRef.Name}
			}
			s.Credentials = append(s.Credentials, cr)
		}
		if p.AllowedExtraResources != nil {
			s.AllowedExtraResources = make([]AllowedResource, 0, len(p.AllowedExtraResources))
			for _, a := range p.AllowedExtraResources {
				ar := AllowedResource{APIVersion: a.APIVersion, Kind: a.Kind, LabelRegexes: a.LabelRegexes}
				if a.NameRegex != nil {
					ar.NameRegex = *a.NameRegex
				}
				s.AllowedExtraResources = append(s.AllowedExtraResources, ar)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// TargetFromFunction builds the Target of a loom.dev Function. It reads the
// Secrets its spec.tls names through secrets (ca.crt from caSecretRef;
// tls.crt and tls.key from clientSecretRef). A Function that is neither
// insecure nor has complete TLS settings is an error: Loom never falls back
// to plaintext.
func TargetFromFunction(ctx context.Context, f *loomv1alpha1.Function, secrets CredentialFetcher) (Target, error) {
	t := Target{Endpoint: f.Spec.Endpoint, Insecure: f.Spec.Insecure}
	if f.Spec.Timeout != nil {
		t.Timeout = f.Spec.Timeout.Duration
	}
	if f.Spec.MaxConcurrency != nil {
		t.MaxConcurrency = int(*f.Spec.MaxConcurrency)
	}
	if t.Insecure {
		return t, nil
	}
	tlsSpec := f.Spec.TLS
	if tlsSpec == nil || tlsSpec.CASecretRef == nil || tlsSpec.ClientSecretRef == nil {
		return Target{}, fmt.Errorf("function %q needs tls.caSecretRef and tls.clientSecretRef unless insecure is true", f.Name)
	}
	read := func(ref *loomv1alpha1.SecretReference, keys ...string) ([][]byte, error) {
		data, err := secrets.FetchCredential(ctx, SecretRef{Namespace: ref.Namespace, Name: ref.Name})
		if err != nil {
			return nil, fmt.Errorf("cannot read Secret %s/%s of function %q: %w", ref.Namespace, ref.Name, f.Name, err)
		}
		out := make([][]byte, 0, len(keys))
		for _, k := range keys {
			if len(data[k]) == 0 {
				return nil, fmt.Errorf("secret %s/%s of function %q has no key %q", ref.Namespace, ref.Name, f.Name, k)
			}
			out = append(out, data[k])
		}
		return out, nil
	}
	ca, err := read(tlsSpec.CASecretRef, loomv1alpha1.CACertKey)
	if err != nil {
		return Target{}, err
	}
	client, err := read(tlsSpec.ClientSecretRef, loomv1alpha1.TLSCertKey, loomv1alpha1.TLSKeyKey)
	if err != nil {
		return Target{}, err
	}
	t.TLS = &TLSMaterial{CA: ca[0], Cert: client[0], Key: client[1], ServerName: tlsSpec.ServerName}
	return t, nil
}

// Request returns the watch request the watcher needs for w: the selector,
// so that resources starting to match later are seen too.
func (w Watch) Request() watchreq.Request {
	return watchreq.Request{
		APIVersion: w.Selector.APIVersion, Kind: w.Selector.Kind, Namespace: w.Selector.Namespace,
		Name: w.Selector.Name, MatchLabels: w.Selector.MatchLabels,
	}
}

// Refs returns what to record in the XR's status.watchedResourceRefs for w:
// the resources it matched.
func (w Watch) Refs() []loomv1alpha1.WatchedResourceRef {
	out := make([]loomv1alpha1.WatchedResourceRef, 0, len(w.Matched))
	for _, m := range w.Matched {
		out = append(out, loomv1alpha1.WatchedResourceRef{APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, Step: w.Step})
	}
	return out
}
