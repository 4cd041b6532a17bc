// Package manager keeps the ClusterRoles of package roles in line with the
// XRDs in the cluster, and tells each XRD, in its Watchable condition,
// whether Loom's watcher may watch its kinds yet.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/services/rbac-manager/internal/roles"
)

// FieldManager is the server-side-apply field manager of the RBAC manager's
// writes: the rules of its ClusterRoles and the Watchable condition of XRDs.
const FieldManager = "loom-rbac-manager"

// TypeWatchable is Loom's condition of an XRD that says whether Loom's
// watcher may list and watch the XRD's XR and claim kinds. While it is
// False, claims and XRs of the XRD are not processed.
const TypeWatchable common.ConditionType = "Watchable"

// Reasons of the Watchable condition.
const (
	ReasonWatchAllowed   common.ConditionReason = "WatchAllowed"
	ReasonWatchForbidden common.ConditionReason = "WatchForbidden"
)

// Defaults of a Manager.
const (
	// DefaultResync is how often the XRD informer replays every XRD, which
	// also puts back rules someone edited out of the roles.
	DefaultResync = 10 * time.Minute
	// DefaultPendingWait is how long to wait before asking again whether
	// the watcher may watch a kind it could not: the clusterrole
	// aggregation controller copies the rules into the watcher's role
	// within moments.
	DefaultPendingWait = 2 * time.Second
)

var xrdGVR = v1.SchemeGroupVersion.WithResource("compositeresourcedefinitions")

// A Manager keeps the roles of package roles and the XRDs' Watchable
// condition. One replica is enough; two do the same writes and do no harm
// (every write is a server-side apply of the same intent).
type Manager struct {
	kube        kubernetes.Interface
	dyn         dynamic.Interface
	watcherUser string
	log         *slog.Logger
	resync      time.Duration
	pendingWait time.Duration

	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
}

// An Option configures a Manager.
type Option func(*Manager)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = l } }

// WithResync sets the informer's resync period (default DefaultResync).
func WithResync(d time.Duration) Option { return func(m *Manager) { m.resync = d } }

// WithPendingWait sets how long to wait before checking again the rights of
// a watcher that may not watch a kind yet (default DefaultPendingWait).
func WithPendingWait(d time.Duration) Option { return func(m *Manager) { m.pendingWait = d } }

// New returns a Manager. watcherUser is the user name of Loom's watcher
// (system:serviceaccount:<namespace>:loom-watcher), whose rights the
// Watchable condition reports.
func New(kube kubernetes.Interface, dyn dynamic.Interface, watcherUser string, o ...Option) *Manager {
	m := &Manager{kube: kube, dyn: dyn, watcherUser: watcherUser, log: slog.Default(), resync: DefaultResync, pendingWait: DefaultPendingWait}
	for _, fn := range o {
		fn(m)
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, m.resync)
	m.informer = f.ForResource(xrdGVR).Informer()
	m.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "rbac-manager"})
	return m
}

// syncKey is the one work item: every change of any XRD recomputes every
// role, so changes coalesce into one sync.
const syncKey = "all"

// Synced reports whether the XRD informer has listed every XRD.
func (m *Manager) Synced() bool { return m.informer.HasSynced() }

// Run watches XRDs and syncs until ctx ends. It blocks.
func (m *Manager) Run(ctx context.Context) error {
	enqueue := func(any) { m.queue.Add(syncKey) }
	if _, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, o any) { enqueue(o) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("cannot watch composite resource definitions: %w", err)
	}
	go m.informer.RunWithContext(ctx)
	go func() {
		<-ctx.Done()
		m.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced) {
		return nil
	}
	m.queue.Add(syncKey)
	for {
		key, quit := m.queue.Get()
		if quit {
			return nil
		}
		again, err := m.Sync(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			m.log.Warn("cannot sync; retrying", "err", err)
			m.queue.AddRateLimited(key)
		case again > 0:
			m.queue.Forget(key)
			m.queue.AddAfter(key, again)
		default:
			m.queue.Forget(key)
		}
		m.queue.Done(key)
	}
}

// Sync applies the rules of every role that differ from what the cluster
// holds, then sets each XRD's Watchable condition. It returns how soon to
// sync again (0: only on the next change), for XRDs whose kinds the watcher
// may not watch yet. It writes nothing when nothing changed.
func (m *Manager) Sync(ctx context.Context) (time.Duration, error) {
	xrds, err := m.list()
	if err != nil {
		return 0, err
	}
	var errs []error
	want := roles.Rules(xrds)
	for _, name := range roles.Names() {
		if err := m.applyRole(ctx, name, want[name]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	var again time.Duration
	for _, xrd := range xrds {
		if xrd.GetDeletionTimestamp() != nil {
			continue
		}
		ok, err := m.setWatchable(ctx, xrd)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			again = m.pendingWait
		}
	}
	return again, errors.Join(errs...)
}

func (m *Manager) list() ([]*v1.CompositeResourceDefinition, error) {
	objs := m.informer.GetStore().List()
	out := make([]*v1.CompositeResourceDefinition, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		xrd := &v1.CompositeResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, xrd); err != nil {
			// One undecodable XRD must not take the others' rights away.
			return nil, fmt.Errorf("cannot decode composite resource definition %q: %w", u.GetName(), err)
		}
		out = append(out, xrd)
	}
	return out, nil
}

// applyRole sets the rules of the named ClusterRole, which the installer
// created, unless it holds them already.
func (m *Manager) applyRole(ctx context.Context, name string, rules []rbacv1.PolicyRule) error {
	cur, err := m.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		return fmt.Errorf("cannot set the rules of ClusterRole %q: it does not exist (the chart or the local stack installs it, the RBAC manager may not create it)", name)
	}
	if err != nil {
		return fmt.Errorf("cannot get ClusterRole %q: %w", name, err)
	}
	if equalRules(cur.Rules, rules) {
		return nil
	}
	ac := rbacv1ac.ClusterRole(name)
	for _, r := range rules {
		ac.WithRules(rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...))
	}
	if _, err := m.kube.RbacV1().ClusterRoles().Apply(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("cannot apply the rules of ClusterRole %q: %w", name, err)
	}
	m.log.Info("Applied ClusterRole", "role", name, "rules", len(rules))
	return nil
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// setWatchable asks the API server whether the watcher may list and watch
// the XRD's kinds, and records the answer in the XRD's Watchable condition
// (server-side apply of that condition alone, only when it changes). It
// reports whether the watcher may.
func (m *Manager) setWatchable(ctx context.Context, xrd *v1.CompositeResourceDefinition) (bool, error) {
	kinds := []string{xrd.Spec.Names.Plural}
	if xrd.OffersClaim() {
		kinds = append(kinds, xrd.Spec.ClaimNames.Plural)
	}
	var denied []string
	for _, plural := range kinds {
		for _, verb := range []string{"list", "watch"} {
			ok, err := m.allowed(ctx, verb, xrd.Spec.Group, plural)
			if err != nil {
				return false, err
			}
			if !ok {
				denied = append(denied, verb+" "+plural+"."+xrd.Spec.Group)
			}
		}
	}
	want := common.Condition{Type: TypeWatchable, Status: corev1.ConditionTrue, Reason: ReasonWatchAllowed}
	if len(denied) > 0 {
		want = common.Condition{Type: TypeWatchable, Status: corev1.ConditionFalse, Reason: ReasonWatchForbidden,
			Message: fmt.Sprintf("Loom's watcher (%s) may not %s: claims and composite resources of this definition are not processed until it may (ClusterRole %s grants it, aggregated into the watcher's role)",
				m.watcherUser, strings.Join(denied, ", "), roles.Watcher)}
	}
	if have, ok := condition.Find(xrd.Status.Conditions, TypeWatchable); ok && have.Equal(want) {
		return len(denied) == 0, nil
	}
	want.LastTransitionTime = metav1.Now()
	intent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.SchemeGroupVersion.String(),
		"kind":       v1.CompositeResourceDefinitionKind,
		"metadata":   map[string]any{"name": xrd.GetName(), "uid": string(xrd.GetUID())},
		"status":     map[string]any{"conditions": condition.List(want)},
	}}
	b, err := intent.MarshalJSON()
	if err != nil {
		return false, fmt.Errorf("cannot encode the status of composite resource definition %q: %w", xrd.GetName(), err)
	}
	_, err = m.dyn.Resource(xrdGVR).Patch(ctx, xrd.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}, "status")
	if kerrors.IsNotFound(err) || kerrors.IsConflict(err) {
		// Gone, or replaced by a new XRD of the same name: its own event
		// brings the next sync.
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot apply the %s condition of composite resource definition %q: %w", TypeWatchable, xrd.GetName(), err)
	}
	m.log.Info("Set condition", "xrd", xrd.GetName(), "type", TypeWatchable, "status", want.Status, "message", want.Message)
	return len(denied) == 0, nil
}

// allowed asks the API server whether the watcher may do verb on resource
// of group, cluster-wide.
func (m *Manager) allowed(ctx context.Context, verb, group, resource string) (bool, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:               m.watcherUser,
		Groups:             serviceAccountGroups(m.watcherUser),
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource},
	}}
	got, err := m.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("cannot review whether %s may %s %s.%s: %w", m.watcherUser, verb, resource, group, err)
	}
	return got.Status.Allowed, nil
}

// serviceAccountGroups returns the groups the API server puts a
// ServiceAccount's user in, so that a review sees bindings to them too.
func serviceAccountGroups(user string) []string {
	parts := strings.Split(user, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return nil
	}
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
}

func ptr[T any](v T) *T { return &v }
