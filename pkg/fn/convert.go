package fn

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	kjson "k8s.io/apimachinery/pkg/util/json"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// toStruct encodes a JSON-compatible object (an unstructured object's
// content) as a protobuf Struct. It goes through JSON so that any value
// encoding/json accepts is accepted.
func toStruct(o map[string]any) (*structpb.Struct, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// jsonToStruct decodes a JSON object as a protobuf Struct.
func jsonToStruct(b []byte) (*structpb.Struct, error) {
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// fromStruct decodes a protobuf Struct into an object as the Kubernetes
// machinery builds them: whole numbers become int64, as they would when the
// object is read from the API server. nil gives nil.
func fromStruct(s *structpb.Struct) (map[string]any, error) {
	if s == nil {
		return nil, nil
	}
	b, err := protojson.Marshal(s)
	if err != nil {
		return nil, err
	}
	var o map[string]any
	if err := kjson.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// toProtoResource encodes one observed resource.
func toProtoResource(r Resource) (*fnv1.Resource, error) {
	s, err := toStruct(r.Object)
	if err != nil {
		return nil, err
	}
	return &fnv1.Resource{Resource: s, ConnectionDetails: maps.Clone(r.ConnectionDetails)}, nil
}

// toProtoState encodes the observed state.
func toProtoState(s State) (*fnv1.State, error) {
	out := &fnv1.State{}
	if s.Composite.Object != nil {
		xr, err := toProtoResource(s.Composite)
		if err != nil {
			return nil, fmt.Errorf("cannot encode the composite resource: %w", err)
		}
		out.Composite = xr
	}
	if len(s.Resources) > 0 {
		out.Resources = make(map[string]*fnv1.Resource, len(s.Resources))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Resources)) {
		r, err := toProtoResource(s.Resources[name])
		if err != nil {
			return nil, fmt.Errorf("cannot encode composed resource %q: %w", name, err)
		}
		out.Resources[name] = r
	}
	return out, nil
}

// fromProtoResource decodes one desired resource.
func fromProtoResource(r *fnv1.Resource) (Resource, error) {
	o, err := fromStruct(r.GetResource())
	if err != nil {
		return Resource{}, err
	}
	out := Resource{Object: o, ConnectionDetails: maps.Clone(r.GetConnectionDetails())}
	switch r.GetReady() { //nolint:exhaustive // Unspecified leaves readiness to the observed resource.
	case fnv1.Ready_READY_TRUE:
		out.Ready = ReadyTrue
	case fnv1.Ready_READY_FALSE:
		out.Ready = ReadyFalse
	}
	return out, nil
}

// fromProtoState decodes the desired state.
func fromProtoState(s *fnv1.State) (State, error) {
	out := State{}
	if s.GetComposite() != nil {
		xr, err := fromProtoResource(s.GetComposite())
		if err != nil {
			return State{}, fmt.Errorf("cannot decode the desired composite resource: %w", err)
		}
		out.Composite = xr
	}
	if len(s.GetResources()) > 0 {
		out.Resources = make(map[string]Resource, len(s.GetResources()))
	}
	for name, r := range s.GetResources() {
		d, err := fromProtoResource(r)
		if err != nil {
			return State{}, fmt.Errorf("cannot decode desired composed resource %q: %w", name, err)
		}
		out.Resources[name] = d
	}
	return out, nil
}
