package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxAttrs is how many attributes an Attrs may have.
const maxAttrs = 5

// Attrs builds the attributes of the measurements of instruments on a hot
// path, whose keys are fixed and whose values come from small sets (a
// service, a kind, an outcome): it keeps the measurement option of each
// combination of values it was asked for, so that a measurement costs a map
// lookup rather than building and sorting an attribute set. Its methods are
// safe for concurrent use. Values must come from small sets: every
// combination is kept for good.
type Attrs struct {
	fixed []attribute.KeyValue
	keys  []attribute.Key
	mu    sync.RWMutex
	opts  map[[maxAttrs]string]metric.MeasurementOption
}

// NewAttrs returns an Attrs of the given keys (at most five), whose
// measurements carry the fixed attributes too.
func NewAttrs(fixed []attribute.KeyValue, keys ...string) *Attrs {
	if len(keys) > maxAttrs {
		panic("telemetry.NewAttrs: more than five keys")
	}
	a := &Attrs{fixed: fixed, opts: map[[maxAttrs]string]metric.MeasurementOption{}}
	for _, k := range keys {
		a.keys = append(a.keys, attribute.Key(k))
	}
	return a
}

// Option returns the measurement option of the attributes whose values
// are values, in the order of the keys; missing values are empty.
func (a *Attrs) Option(values ...string) metric.MeasurementOption {
	var k [maxAttrs]string
	copy(k[:], values)
	a.mu.RLock()
	o, ok := a.opts[k]
	a.mu.RUnlock()
	if ok {
		return o
	}
	kvs := make([]attribute.KeyValue, 0, len(a.fixed)+len(a.keys))
	kvs = append(kvs, a.fixed...)
	for i, key := range a.keys {
		kvs = append(kvs, key.String(k[i]))
	}
	o = metric.WithAttributeSet(attribute.NewSet(kvs...))
	a.mu.Lock()
	a.opts[k] = o
	a.mu.Unlock()
	return o
}
