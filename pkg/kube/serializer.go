package kube

import (
	"fmt"
	"io"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/objjson"
)

// NewDynamic returns a dynamic client of rc, as dynamic.NewForConfig does,
// whose JSON of objects is read and written by package objjson instead of
// encoding/json: the responses to every read and write, the objects of
// every watch event (a quarter of the watcher's CPU went to decoding them)
// and the bodies of creates and updates; watch events' envelopes are split
// without decoding them (watchEventSerializer). Everything else (lists,
// Status errors, other media types) goes through client-go's own serializer
// as before.
func NewDynamic(rc *rest.Config) (*dynamic.DynamicClient, error) {
	cfg := dynamic.ConfigFor(rc)
	cfg.NegotiatedSerializer = newObjectNegotiator(cfg.NegotiatedSerializer)
	// As dynamic.NewForConfigAndClient: the client builds every path.
	cfg.GroupVersion = nil
	cfg.APIPath = "/if-you-see-this-search-for-the-break"
	c, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return dynamic.New(c), nil
}

// objectNegotiator is a negotiated serializer whose JSON serializer is an
// objectSerializer over the one it wraps.
type objectNegotiator struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newObjectNegotiator(base runtime.NegotiatedSerializer) objectNegotiator {
	meta := runtime.NewScheme()
	metav1.AddToGroupVersion(meta, schema.GroupVersion{Version: "v1"})
	infos := slices.Clone(base.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeJSON {
			infos[i].Serializer = objectSerializer{fallback: infos[i].Serializer, meta: meta}
			if ss := infos[i].StreamSerializer; ss != nil {
				stream := *ss
				stream.Serializer = watchEventSerializer{Serializer: ss.Serializer}
				stream.Framer = objectFramer{Framer: ss.Framer}
				infos[i].StreamSerializer = &stream
			}
		}
	}
	return objectNegotiator{NegotiatedSerializer: base, infos: infos}
}

func (n objectNegotiator) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// objectSerializer reads and writes unstructured objects with package
// objjson and leaves everything else to fallback.
type objectSerializer struct {
	fallback runtime.Serializer
	// meta knows the kinds the dynamic client decodes to typed metav1
	// objects (Status, WatchEvent, ...): those go to fallback.
	meta *runtime.Scheme
}

// Decode decodes an object into an *unstructured.Unstructured (into, or a
// new one when into is nil), as client-go's JSON serializer would. Data it
// cannot decode, or of a kind without a kind, goes to fallback, which then
// fails as it always has.
func (s objectSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, ok := into.(*unstructured.Unstructured)
	if into != nil && !ok {
		return s.fallback.Decode(data, defaults, into)
	}
	m, err := objjson.Decode(data)
	if err != nil {
		return s.fallback.Decode(data, defaults, into)
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if kind == "" || (into == nil && s.meta.Recognizes(gvk)) {
		return s.fallback.Decode(data, defaults, into)
	}
	if u == nil {
		u = &unstructured.Unstructured{}
	}
	u.Object = m
	return u, &gvk, nil
}

// Encode writes an *unstructured.Unstructured as JSON; anything else goes
// to fallback.
func (s objectSerializer) Encode(obj runtime.Object, w io.Writer) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return s.fallback.Encode(obj, w)
	}
	b, err := objjson.Append(make([]byte, 0, 4096), u.Object)
	if err != nil {
		return fmt.Errorf("cannot encode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	_, err = w.Write(b)
	return err
}

// Identifier names the serializer for client-go's caches of encodings.
func (s objectSerializer) Identifier() runtime.Identifier {
	return runtime.Identifier("loom-objjson-" + string(s.fallback.Identifier()))
}
