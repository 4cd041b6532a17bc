package compose

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/json"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// A ConnectionDetail is one key that a composed resource contributes to its
// composite resource's connection secret. FromFieldPath and FromValue details
// carry their value. FromConnectionSecretKey details only say where the value
// is: the key of the composed resource's connection secret, which the secrets
// service reads; the engine never sees Secret data.
type ConnectionDetail struct {
	// Template is the name of the template of the composed resource.
	Template string `json:"template"`
	// Name is the key in the composite resource's connection secret.
	Name string `json:"name"`
	// Type of the detail.
	Type v1.ConnectionDetailType `json:"type"`
	// FromConnectionSecretKey is the key to read from the composed
	// resource's connection secret (FromConnectionSecretKey only).
	FromConnectionSecretKey string `json:"fromConnectionSecretKey,omitempty"`
	// SecretRef is the composed resource's connection secret, from its
	// spec.writeConnectionSecretToRef, if it has one (FromConnectionSecretKey
	// only).
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Value is the value (FromFieldPath and FromValue only): a string field as
	// is, any other value JSON encoded.
	Value string `json:"value,omitempty"`
}

// A SecretRef names a Secret.
type SecretRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// ExtractConnectionDetails returns the connection details a template's
// composed resource contributes, given the observed resource (its JSON
// content). Details are only extracted from resources that exist; a nil
// observed yields none. A FromFieldPath detail whose field does not exist is
// skipped. A detail that is not valid is an error (of class ErrInvalid)
// naming it, e.g. "connectionDetails[2]".
func ExtractConnectionDetails(template string, observed map[string]any, cds []v1.ConnectionDetail) ([]ConnectionDetail, error) {
	if observed == nil {
		return nil, nil
	}
	p := fieldpath.Pave(observed)
	out := make([]ConnectionDetail, 0, len(cds))
	for i, cd := range cds {
		d, ok, err := extract(template, p, cd)
		if err != nil {
			return nil, fmt.Errorf("connectionDetails[%d]: %w", i, err)
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

func extract(template string, p *fieldpath.Paved, cd v1.ConnectionDetail) (ConnectionDetail, bool, error) {
	d := ConnectionDetail{Template: template, Type: cd.GetType(), Name: ptrOr(cd.Name, "")}
	switch d.Type {
	case v1.ConnectionDetailTypeFromConnectionSecretKey:
		if cd.FromConnectionSecretKey == nil || *cd.FromConnectionSecretKey == "" {
			return d, false, errors.New("fromConnectionSecretKey is required by type FromConnectionSecretKey")
		}
		d.FromConnectionSecretKey = *cd.FromConnectionSecretKey
		if d.Name == "" {
			d.Name = d.FromConnectionSecretKey
		}
		if ref, err := p.GetStringObject("spec.writeConnectionSecretToRef"); err == nil && ref["name"] != "" {
			d.SecretRef = &SecretRef{Namespace: ref["namespace"], Name: ref["name"]}
		}
		return d, true, nil
	case v1.ConnectionDetailTypeFromFieldPath:
		if d.Name == "" {
			return d, false, errors.New("name is required by type FromFieldPath")
		}
		if cd.FromFieldPath == nil || *cd.FromFieldPath == "" {
			return d, false, errors.New("fromFieldPath is required by type FromFieldPath")
		}
		v, err := p.GetValue(*cd.FromFieldPath)
		if fieldpath.IsNotFound(err) {
			return d, false, nil
		}
		if err != nil {
			return d, false, fmt.Errorf("fromFieldPath: %w", err)
		}
		if s, ok := v.(string); ok {
			d.Value = s
			return d, true, nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return d, false, fmt.Errorf("cannot encode %s as JSON: %w", *cd.FromFieldPath, err)
		}
		d.Value = string(b)
		return d, true, nil
	case v1.ConnectionDetailTypeFromValue:
		if d.Name == "" {
			return d, false, errors.New("name is required by type FromValue")
		}
		if cd.Value == nil {
			return d, false, errors.New("value is required by type FromValue")
		}
		d.Value = *cd.Value
		return d, true, nil
	case "":
		return d, false, errors.New("one of fromConnectionSecretKey, fromFieldPath and value is required")
	}
	return d, false, fmt.Errorf("unknown type %q (want FromConnectionSecretKey, FromFieldPath or FromValue)", d.Type)
}
