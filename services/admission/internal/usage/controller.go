package usage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// A Controller reconciles every Usage the Index sees, on every change and
// again when the Reconciler asks. It is a plain informer and work queue,
// not controller-runtime: the component already has the informer (the
// webhook's Index), a Usage is reconciled by name, and a manager would
// bring a second cache and client of its own for one kind.
type Controller struct {
	index   *Index
	r       *Reconciler
	workers int
	log     *slog.Logger
	queue   workqueue.TypedRateLimitingInterface[string]
}

// NewController returns a Controller running workers reconciles at once.
func NewController(index *Index, r *Reconciler, workers int, log *slog.Logger) *Controller {
	return &Controller{
		index: index, r: r, workers: max(workers, 1), log: log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "usages"}),
	}
}

// Run reconciles Usages until ctx ends. It blocks. The Index must be
// running.
func (c *Controller) Run(ctx context.Context) error {
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	reg, err := c.index.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.index.Informer().RemoveEventHandler(reg) }()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	wg.Wait()
	return nil
}

// next reconciles one Usage of the queue; false once the queue is shut.
func (c *Controller) next(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := c.r.Reconcile(rctx, name)
	switch {
	case err != nil:
		c.log.Info("cannot reconcile Usage", "usage", name, "err", err)
		c.queue.AddRateLimited(name)
	case res.Requeue:
		c.queue.AddRateLimited(name)
	case res.RequeueAfter > 0:
		c.queue.Forget(name)
		c.queue.AddAfter(name, res.RequeueAfter)
	default:
		c.queue.Forget(name)
	}
	return true
}
