package composite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// gatedApplier is a Client whose Apply waits until want applies are in
// flight at once (or ten seconds pass), so that a test sees how many a render
// sends together; the resource named fail is refused.
type gatedApplier struct {
	Client
	want int
	fail string

	mu       sync.Mutex
	inFlight int
	most     int
	all      chan struct{}
}

func (g *gatedApplier) Apply(_ context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	if g.inFlight == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(10 * time.Second):
	}
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
	if intent.GetName() == g.fail {
		return nil, errors.New("refused")
	}
	return intent, nil
}

func TestApplyResourcesInParallel(t *testing.T) {
	const n = 5
	g := &gatedApplier{want: n, fail: "r-3", all: make(chan struct{})}
	r := NewReconciler(g, nil, nil)
	xr := &unstructured.Unstructured{Object: map[string]any{}}
	xr.SetAPIVersion("example.org/v1")
	xr.SetKind("XNop")
	xr.SetName("one-abcde")
	st := &state{xr: xr, composer: g}
	out := &rendered{}
	for i := range n {
		d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"i": int64(i)}}}
		d.SetAPIVersion("nop.crossplane.io/v1alpha1")
		d.SetKind("NopResource")
		d.SetName(fmt.Sprintf("r-%d", i))
		out.resources = append(out.resources, composed{name: fmt.Sprintf("res-%d", i), desired: d})
	}
	err := r.applyResources(t.Context(), st, out)
	if g.most != n {
		t.Errorf("applyResources(...): %d applies in flight at most, want %d (one render's applies go out together)", g.most, n)
	}
	if err == nil || !strings.Contains(err.Error(), `"res-3"`) {
		t.Errorf("applyResources(...): error %v, want the refusal of res-3", err)
	}
	for i, c := range out.resources {
		if (c.applyErr != nil) != (i == 3) {
			t.Errorf("applyResources(...): resource %s applyErr %v, want an error for res-3 only", c.name, c.applyErr)
		}
		if i != 3 && c.observed == nil {
			t.Errorf("applyResources(...): resource %s has no observed object after its apply", c.name)
		}
	}
}
