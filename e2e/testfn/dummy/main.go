// Command dummy is a test composition function that does the job of
// upstream's function-dummy (github.com/crossplane-contrib/function-dummy),
// which Crossplane's end-to-end suite uses and the module proxy does not
// serve: it overlays the RunFunctionResponse its input carries on the
// response it would return anyway (the request's desired state), with
// proto.Merge, as function-dummy does.
//
//	apiVersion: dummy.fn.crossplane.io/v1beta1
//	kind: Response
//	response:            # a RunFunctionResponse, in protobuf's JSON form
//	  desired: {...}
//	  results: [...]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loomxr/loom/e2e/testfn/internal/testfn"
)

// APIVersion and Kind of the input, function-dummy's.
const (
	APIVersion = "dummy.fn.crossplane.io/v1beta1"
	Kind       = "Response"
)

// Input is function-dummy's input.
type Input struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Response   json.RawMessage `json:"response"`
}

type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func main() { testfn.Serve(&fn{}) }

// RunFunction returns the request's desired state with the input's
// response merged over it.
func (f *fn) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	overlay, err := decode(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	proto.Merge(rsp, overlay)
	return rsp, nil
}

// decode returns the response the input of req carries.
func decode(req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	if req.GetInput() == nil {
		return nil, errors.New("input is required")
	}
	b, err := protojson.Marshal(req.GetInput())
	if err != nil {
		return nil, fmt.Errorf("cannot encode input: %w", err)
	}
	in := Input{}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("cannot decode input: %w", err)
	}
	if in.APIVersion != APIVersion || in.Kind != Kind {
		return nil, fmt.Errorf("input must be %s %s, not %s %s", APIVersion, Kind, in.APIVersion, in.Kind)
	}
	out := &fnv1.RunFunctionResponse{}
	if len(in.Response) == 0 {
		return out, nil
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(in.Response, out); err != nil {
		return nil, fmt.Errorf("cannot decode input response: %w", err)
	}
	return out, nil
}
