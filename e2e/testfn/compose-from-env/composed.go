package main

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
)

// composedFrom wraps an object as a desired composed resource.
func composedFrom(o map[string]any) (*resource.DesiredComposed, error) {
	u := composed.New()
	u.SetUnstructuredContent(o)
	if u.GetKind() == "" {
		return nil, fmt.Errorf("composed resource has no kind")
	}
	return &resource.DesiredComposed{Resource: u}, nil
}
