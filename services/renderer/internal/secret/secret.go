// Package secret reads Secrets for the renderer, which may only get them
// (never list, watch or write): the credentials of composition function
// steps, the TLS material of loom.dev Functions, and the connection details
// of observed resources that function pipelines receive. Secret data never
// leaves the process except to the functions, over mutual TLS.
package secret

import (
	"context"
	"encoding/base64"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/fn"
)

// GVK is the kind of a Secret.
var GVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// A Getter gets objects.
type Getter interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
}

// Reader reads the data of Secrets. It is safe for concurrent use.
type Reader struct {
	client Getter
}

// NewReader returns a Reader.
func NewReader(c Getter) *Reader { return &Reader{client: c} }

// ReadSecret returns the data of the Secret, or nil data if it does not
// exist.
func (r *Reader) ReadSecret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	data, err := r.read(ctx, namespace, name)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	return data, err
}

// FetchCredential returns the data of the Secret ref names; a Secret that
// does not exist is an error.
func (r *Reader) FetchCredential(ctx context.Context, ref fn.SecretRef) (map[string][]byte, error) {
	return r.read(ctx, ref.Namespace, ref.Name)
}

var _ fn.CredentialFetcher = (*Reader)(nil)

func (r *Reader) read(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	u, err := r.client.Get(ctx, GVK, namespace, name)
	if err != nil {
		return nil, err
	}
	raw, _, _ := unstructured.NestedStringMap(u.Object, "data")
	out := make(map[string][]byte, len(raw))
	for k, v := range raw {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("cannot decode key %q of Secret %s/%s: %w", k, namespace, name, err)
		}
		out[k] = b
	}
	return out, nil
}
