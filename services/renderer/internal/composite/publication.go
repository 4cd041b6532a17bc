package composite

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/xcrd"
)

// TypeConnectionDetailsReady is the XR condition that says whether its
// connection Secret is published. The secrets service decides it; the
// renderer writes it (see Publication).
const TypeConnectionDetailsReady common.ConditionType = "ConnectionDetailsReady"

// A Publication is what the secrets service published for a LegacyCluster
// XR: the XR's ConnectionDetailsReady condition and
// status.connectionDetails.lastPublishedTime. The secrets service hands it
// to the renderer instead of writing the XR's status itself, and the
// renderer writes it with the rest of the XR's status: an XR whose
// connection Secret is published before it turns Ready gets one status
// write, Ready and published, where two writers took two.
type Publication struct {
	// Condition is the XR's ConnectionDetailsReady condition; nil when
	// the XR gets none.
	Condition *common.Condition
	// LastPublishedTime is when the XR's Secret data last changed (RFC
	// 3339); empty before the first publication.
	LastPublishedTime string
}

// DefaultPublicationWait is how long, by default, an XR that turns Ready
// waits for its connection Secret's first publication (see
// WithPublicationWait).
const DefaultPublicationWait = 3 * time.Second

// WithPublicationWait sets how long after a render first found it Ready an XR
// whose connection Secret has not been published yet waits for
// the secrets service's hand-over before its status says Ready (default
// DefaultPublicationWait; zero or negative: not at all). Crossplane
// publishes an XR's connection Secret and writes its Ready condition in one
// reconcile; the wait lets Loom's two services do the same in one status
// write when the secrets service is a moment behind the renderer (its
// hand-over brings the XR back sooner). The claim, whose Ready waits for the
// publication anyway, is not delayed by it.
func WithPublicationWait(d time.Duration) Option {
	return func(rc *Reconciler) { rc.publicationWait = d }
}

// publicationHold is how long after its arrival a hand-over of an XR that is
// not Ready waits for the XR's next status (its turn to Ready, usually)
// rather than be written on its own: a connection Secret is often published
// while the last composed resources are still on their way to Ready.
const publicationHold = 10 * time.Second

// handedOver is a hand-over the XR's status may not show yet.
type handedOver struct {
	Publication
	// at is when it arrived.
	at time.Time
}

// handOver records p, the secrets service's latest publication for the XR
// uid, until the XR's status shows it.
func (m *memo) handOver(uid types.UID, p Publication, at time.Time) {
	m.publications.Add(uid, handedOver{Publication: p, at: at})
}

// handedOver returns the publication the secrets service handed over for
// uid that the XR's status may not show yet.
func (m *memo) handedOver(uid types.UID) (handedOver, bool) {
	v, ok := m.publications.Get(uid)
	if !ok {
		return handedOver{}, false
	}
	return v.(handedOver), true //nolint:forcetypeassert // Only handedOvers are stored.
}

// holdWait returns how much longer the status of an XR that stays not Ready
// waits for its next change before it is written with the publication
// handed over (see publicationHold), or zero.
func (r *Reconciler) holdWait(st *state, out *rendered, err error) time.Duration {
	h, ok := r.memo.handedOver(st.xr.GetUID())
	if !ok || !stillUnready(st, out, err) {
		return 0
	}
	if _, pending := r.publication(st.xr); !pending {
		return 0
	}
	return publicationHold - r.now().Sub(h.at)
}

// shown forgets the hand-over of uid: the XR's status shows it.
func (m *memo) shown(uid types.UID) { m.publications.Remove(uid) }

// publication returns what the XR's status says of its connection Secret
// after this render, and whether it comes from a hand-over the status does
// not show yet: the hand-over this replica holds, unless the XR shows a
// newer publication (another replica wrote it); else what the XR shows, so
// that the renderer's status apply keeps it.
func (r *Reconciler) publication(xr *unstructured.Unstructured) (Publication, bool) {
	shown := shownPublication(xr)
	h, ok := r.memo.handedOver(xr.GetUID())
	if !ok || xcrd.PublishedAfter(shown.LastPublishedTime, h.LastPublishedTime) {
		return shown, false
	}
	return h.Publication, true
}

// shownPublication returns the publication xr's status shows.
func shownPublication(xr *unstructured.Unstructured) Publication {
	var p Publication
	if c, ok := condition.Find(condition.Observed(xr), TypeConnectionDetailsReady); ok {
		p.Condition = &c
	}
	p.LastPublishedTime, _, _ = unstructured.NestedString(xr.Object, "status", xcrd.FieldConnectionDetails, "lastPublishedTime")
	return p
}

// readyWait returns how much longer the XR's status waits for the
// first publication of its connection Secret (see WithPublicationWait), or
// zero when it is written now: the status would not turn the XR Ready, the
// XR has no connection Secret, its connection details do not follow its
// resources' progress (see detailsFollowProgress), its publication is known
// (handed over or shown), or the wait is over. The wait counts from the first render that
// found the XR Ready (on this replica: condition times have whole seconds,
// and another replica's clock may differ).
func (r *Reconciler) readyWait(st *state, sel *selection, out *rendered, err error) time.Duration {
	if r.publicationWait <= 0 || err != nil || out.failed || len(out.watched) > 0 || !st.xrd.GetScope().Legacy() {
		return 0
	}
	if readyCondition(out).Status != corev1.ConditionTrue || condition.IsTrue(st.xr, common.TypeReady) || !detailsFollowProgress(sel.revision) {
		return 0
	}
	if st.getString(xcrd.FieldWriteConnectionSecretToRef, "name") == "" && sel.patch[xcrd.FieldWriteConnectionSecretToRef] == nil {
		return 0
	}
	if p, _ := r.publication(st.xr); p.Condition != nil || p.LastPublishedTime != "" {
		return 0
	}
	return r.publicationWait - r.now().Sub(r.memo.readySince(st.xr.GetUID(), r.now()))
}

// readySince returns when this replica first found the XR uid Ready but
// its connection Secret not published, recording now if it had not.
func (m *memo) readySince(uid types.UID, now time.Time) time.Time {
	if v, ok := m.ready.Get(uid); ok {
		return v.(time.Time) //nolint:forcetypeassert // Only times are stored.
	}
	m.ready.Add(uid, now)
	return now
}

// detailsFollowProgress reports whether the connection details of an XR
// composed with rev are typically completed by the progress that also turns
// its resources Ready, so that the secrets service publishes them about when
// the XR turns Ready: a provider's status (a FromFieldPath detail under
// status) or connection Secret (FromConnectionSecretKey), or the functions
// of a Pipeline, whose details the render hands over itself. Details that
// are known from the start (FromValue, fields of the spec) are published
// when the XR turns Ready (the secrets service hears of no creation before),
// and a wait for them would only delay it.
func detailsFollowProgress(rev *v1.CompositionRevision) bool {
	if rev == nil {
		return false
	}
	spec := &rev.Spec.CompositionSpec
	if spec.GetMode() == v1.CompositionModePipeline {
		return true
	}
	for i := range spec.Resources {
		for j := range spec.Resources[i].ConnectionDetails {
			d := &spec.Resources[i].ConnectionDetails[j]
			switch d.GetType() {
			case v1.ConnectionDetailTypeFromConnectionSecretKey:
				return true
			case v1.ConnectionDetailTypeFromFieldPath:
				if p := d.FromFieldPath; p != nil && (*p == "status" || strings.HasPrefix(*p, "status.") || strings.HasPrefix(*p, "status[")) {
					return true
				}
			case v1.ConnectionDetailTypeFromValue:
				// Known from the start.
			}
		}
	}
	return false
}
