package composition

import (
	"context"
	"fmt"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	extinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// byGroupKind indexes CRDs by the group and kind they define.
const byGroupKind = "groupKind"

// A CRDIndex is a CRDGetter that answers from an informer: the webhook
// must answer within the API server's timeout, and Compositions are
// written far less often than CRDs would be read.
type CRDIndex struct {
	informer cache.SharedIndexInformer
}

// NewCRDIndex returns a CRDIndex over the CRDs cs can list and watch. Run
// starts it.
func NewCRDIndex(cs clientset.Interface) (*CRDIndex, error) {
	inf := extinformers.NewSharedInformerFactory(cs, 0).Apiextensions().V1().CustomResourceDefinitions().Informer()
	if err := inf.AddIndexers(cache.Indexers{byGroupKind: func(obj any) ([]string, error) {
		crd, ok := obj.(*extv1.CustomResourceDefinition)
		if !ok {
			return nil, nil
		}
		return []string{schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}.String()}, nil
	}}); err != nil {
		return nil, fmt.Errorf("cannot index CustomResourceDefinitions: %w", err)
	}
	return &CRDIndex{informer: inf}, nil
}

// Run lists and watches CRDs until ctx ends. It blocks.
func (x *CRDIndex) Run(ctx context.Context) { x.informer.RunWithContext(ctx) }

// Synced reports whether every CRD has been listed.
func (x *CRDIndex) Synced() bool { return x.informer.HasSynced() }

// CRD returns the CRD that defines gk.
func (x *CRDIndex) CRD(gk schema.GroupKind) (*extv1.CustomResourceDefinition, error) {
	objs, err := x.informer.GetIndexer().ByIndex(byGroupKind, gk.String())
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, kerrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, gk.String())
	}
	crd, ok := objs[0].(*extv1.CustomResourceDefinition)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in the CustomResourceDefinition index", objs[0])
	}
	return crd, nil
}
