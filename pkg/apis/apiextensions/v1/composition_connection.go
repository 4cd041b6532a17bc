package v1

// A ConnectionDetailType says where a connection detail's value comes from.
type ConnectionDetailType string

// Connection detail types.
const (
	// ConnectionDetailTypeFromConnectionSecretKey copies a key of the composed
	// resource's connection secret.
	ConnectionDetailTypeFromConnectionSecretKey ConnectionDetailType = "FromConnectionSecretKey"
	// ConnectionDetailTypeFromFieldPath reads a field of the composed
	// resource.
	ConnectionDetailTypeFromFieldPath ConnectionDetailType = "FromFieldPath"
	// ConnectionDetailTypeFromValue is a fixed value.
	ConnectionDetailTypeFromValue ConnectionDetailType = "FromValue"
)

// A ConnectionDetail is one key that a composed resource contributes to its
// composite resource's connection secret.
type ConnectionDetail struct {
	// Name of the key in the composite resource's connection secret. For
	// FromConnectionSecretKey it defaults to the source key; the other types
	// require it.
	// +optional
	Name *string `json:"name,omitempty"`

	// Type of the connection detail. When omitted it is inferred from the
	// fields that are set, in this order of precedence: FromValue,
	// FromConnectionSecretKey, FromFieldPath.
	// +optional
	// +kubebuilder:validation:Enum=FromConnectionSecretKey;FromFieldPath;FromValue
	Type *ConnectionDetailType `json:"type,omitempty"`

	// FromConnectionSecretKey is the key of the composed resource's
	// connection secret whose value is used.
	// +optional
	FromConnectionSecretKey *string `json:"fromConnectionSecretKey,omitempty"`

	// FromFieldPath is the path of the field of the composed resource whose
	// value is used: as is if it is a string, else JSON encoded.
	// +optional
	FromFieldPath *string `json:"fromFieldPath,omitempty"`

	// Value is a fixed, non-sensitive value, for example a well-known port.
	// +optional
	Value *string `json:"value,omitempty"`
}

// GetType returns the connection detail's type, inferring it when unset. It
// returns "" if no source field is set.
func (c *ConnectionDetail) GetType() ConnectionDetailType {
	switch {
	case c.Type != nil:
		return *c.Type
	case c.Value != nil:
		return ConnectionDetailTypeFromValue
	case c.FromConnectionSecretKey != nil:
		return ConnectionDetailTypeFromConnectionSecretKey
	case c.FromFieldPath != nil:
		return ConnectionDetailTypeFromFieldPath
	}
	return ""
}
