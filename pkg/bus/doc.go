// Package bus is Loom's event bus over NATS JetStream: the watcher publishes
// events that name changed objects, and the consuming services (renderer,
// binder, secrets) run Workers that hand each target to a Handler, one at a
// time across all replicas, with the latest event only.
//
// The API is the one agreed for issue 3 (EnsureStreams, Publisher, Worker,
// Handler, Request, Result, Permanent), with these additions: Config has
// LeaseTTL, Storage and dead-letter limits; Option (WithConfig, WithLogger)
// configures both publishers and workers; WithDrainTimeout and
// WithOwnershipHook; WithLookahead, WithFairKey, WithTargetBudget,
// WithQuarantine and SchedulingFlags; WithArrivals; Worker.Owned; ListDeadLetters, GetDeadLetter and
// ReplayDeadLetter; HeaderCarrier, InjectTrace, ExtractTrace; DecodeEvent,
// MsgID, Partition, WorkSubject. Nothing was changed.
//
// # Streams and subjects
//
// Each service has a work stream LOOM_<SERVICE> on subjects
// loom.<service>.<partition>.<targetUID>, where partition is fnv-1a (32 bit)
// of the target UID modulo Config.Partitions (default 32). UIDs are subject
// tokens because Kubernetes names may contain dots. The stream has work-queue
// retention (acked messages are removed) and keeps one message per subject,
// so a newer event for a target replaces an unprocessed older one: events
// coalesce in the server before any worker sees them. Each partition has a
// durable pull consumer <service>-pNN filtered to its subjects.
//
// An urgent event (eventsv1.Event.Urgent: progress of work under way, such
// as an XR turning Ready) goes to
// loom.<service>.<partition>.<targetUID>.urgent instead, the partition's
// urgent lane, consumed by <service>-pNN-urgent. A target has at most one
// request in each lane. The owner of a partition consumes every lane; a
// free handler slot goes to a waiting urgent request first, and a target
// waiting for a slot becomes urgent when an urgent event for it arrives, so
// that urgent work never queues behind a backlog of new work.
//
// A resync event (type RESYNC: the watcher's periodic full resync, which
// says nothing is known to have changed) goes to
// loom.<service>.<partition>.<targetUID>.resync, the partition's resync
// lane, consumed by <service>-pNN-resync, and is stored only if no resync
// of the target is queued there. It is background work: a main-pool slot
// goes to a resync request only when no urgent or normal request waits, and
// resync requests hold at most three quarters of the main pool (all of a
// pool of one), so that a full resync of every object never delays a real
// change. A change of a target whose resync waits replaces the resync and
// moves the target to the normal (or urgent) lane; a resync of a target
// already waiting or running is acknowledged without a run of its own. The
// urgent and resync consumers are created by the first worker that owns
// their partition.
//
// A hand-over (an event carrying a Publication: what the secrets service
// published for an XR, for the renderer to write) goes to
// loom.<service>.<partition>.<targetUID>_handover, a subject of its own
// that the partition's normal consumer serves, so that no later event of
// the target replaces it in the stream; a worker that folds it into a
// newer event of the target keeps its Publication in that event.
//
// The overflow lane, loom.<service>.<partition>.<targetUID>[_handover].overflow
// and consumer <service>-pNN-overflow (created like the urgent one), is
// where the owner of a partition moves an urgent or normal event it has no
// room for: when the event's lane already holds WithLookahead waiting
// targets and the event's tenant holds its share of them or more, a copy
// goes to the overflow lane (starting at delivery 1) and the event is
// acknowledged once the copy is stored, so that the lane reads on past one
// tenant's backlog to other tenants' events however long that backlog is.
// The lane does not wait for each copy to be stored (up to 256 moves of a
// partition wait for JetStream's answer at a time); an event whose copy
// fails is given back, and waits for room when it comes again. Only workers publish
// there; an event is moved at most once (the overflow lane moves nothing
// on, and an event delivered again is never moved). A moved request waits
// in the scheduler's urgent lane if its event is urgent
// (eventsv1.Event.Urgent), else in the normal one; a target's urgent and
// normal events share its overflow subject, so the newer replaces the
// older there as elsewhere.
//
// LOOM_DLQ holds dead letters on loom.dlq.<service>: the original payload and
// headers plus Loom-Dlq-Reason, -Deliveries, -Subject, -Stream-Seq,
// -Failed-At and -Service. ReplayDeadLetter publishes one back to its work
// subject as a fresh message and deletes it; `loomctl dlq` wraps both.
//
// Two key-value buckets coordinate replicas: LOOM_MEMBERS (one heartbeat per
// live worker, <service>.<replicaID>) and LOOM_LEASES (one lease per owned
// partition, <service>.<partition>, valued with the owning worker instance).
// Both expire entries Config.LeaseTTL after their last write and leave a
// marker, so watchers see an expiry at once.
//
// EnsureStreams creates all of it with Config.Replicas replicas and waits for
// leaders while a cluster elects them. Every Publisher and Worker must use
// the same Partitions: EnsureStreams records it on the streams and refuses a
// different value, a Publisher checks it before its first event for each
// service, and Worker.Run before it joins. Workers take the lease timing from
// the leases bucket, so the bucket's TTL (Config.LeaseTTL as last given to
// EnsureStreams) rules.
//
// Connections should be made with nats.MaxReconnects(-1) and every server's
// URL: the publisher resends for about 15 seconds, consumers and key-value
// watchers resume after a reconnect, and a worker whose lease renewals fail
// in the meantime fences its partitions and takes them back afterwards.
//
// # Publishing
//
// Publish is asynchronous, with at most WithMaxInFlight events awaiting
// their acknowledgement (Publish blocks beyond that); Flush waits for all.
// Each message carries the trace context of the caller (W3C headers through
// HeaderCarrier, a case-sensitive carrier over nats.Header) and, when the
// event has a resourceVersion, Nats-Msg-Id = target UID, object UID,
// resourceVersion and type, so that active-active watchers store each change
// once within Config.DuplicateWindow. Events without a resourceVersion
// (requeue requests, for instance) are not deduplicated.
//
// # Exclusivity: partitions, leases and fencing
//
// A target is handled by at most one replica of a service at a time, because
// only the owner of its partition pulls from the partition's consumer and
// runs handlers for it.
//
//   - Membership: every worker puts its heartbeat every LeaseTTL/4 and watches
//     the others'. A replica is live while its entry is fresher than LeaseTTL
//     and not deleted. Partitions are assigned to live replicas by rendezvous
//     hashing, so a joining or leaving replica moves only its own share.
//   - Leases: a replica takes a partition by creating its lease key (a
//     compare-and-set that fails while anyone holds it) and renews it every
//     LeaseTTL/4 with a compare-and-set on the revision. It pulls only while it
//     holds the lease.
//   - Self-fencing: a lease sent for renewal at time t cannot expire in the
//     server before t+LeaseTTL. The owner therefore cancels every handler
//     context of the partition and stops pulling at t+LeaseTTL-LeaseTTL/3 if
//     no renewal succeeded since, leaving handlers a third of the TTL to
//     return. (The brief's "handler timeout < lease margin" is achieved this
//     way, for every handler, whatever WithHandlerTimeout says: handlers may
//     run long while their replica stays healthy, and a dead replica's
//     partitions still move within a few seconds.) Handlers must return
//     promptly once their context is cancelled; the runtime waits for them
//     before it considers the partition given up.
//   - Graceful leave (Run's context ends): the worker deletes its membership,
//     stops pulling, gives buffered messages back (Nak), lets running handlers
//     finish within the drain timeout (renewing the leases meanwhile), acks
//     their messages, and deletes its leases; the next owners, watching the
//     leases bucket, take over at once.
//   - Crash: the leases expire after LeaseTTL and the markers wake the next
//     owners; the crashed replica's unacked messages are redelivered to them
//     after AckWait.
//
// Rebalancing therefore converges within a heartbeat after a join or a
// graceful leave and within about LeaseTTL after a crash; the tests measure
// both and check that no partition ever has two owners.
//
// Assumptions: server and worker clocks run at the same rate (the lease
// expiry is timed by the server, the fence by the worker) and handlers honour
// cancellation. The JetStream pinned-client priority groups were not used:
// pinning one client per consumer does not spread 32 consumers across
// replicas, and an unpinned client does not learn it lost the pin until its
// next pull, so it could still be handling a target the new pin receives.
//
// # Within one replica
//
// Handlers run with bounded concurrency (WithConcurrency) across targets.
// Each partition lane (urgent, normal, resync, overflow) keeps up to
// WithLookahead received targets waiting for a slot in memory (their events
// get InProgress while they wait); a lane with that many waiting stops
// pulling, except the urgent and normal lanes: there, an event of a tenant
// that holds its share of the lane (WithLookahead divided among the
// tenants waiting in it, the event's included) goes to the overflow lane,
// and an event of a tenant under its share takes up to WithLookahead more
// room, so that a tenant's request is received, and takes its turn below,
// whatever another tenant's backlog in the same partition.
// Freed slots go to real changes (urgent and normal requests), and to
// resync ones only when no change waits. Changes are served round-robin
// across tenant keys (WithFairKey: by default the target's namespace, else
// the event's tenant, the namespace of the claim an XR is bound to, else a
// namespaced changed object's or controller's, else a key derived from the
// target's name), and within a key urgent requests first, first come,
// first served within a lane, so that a burst of one namespace, urgent or
// not, does not make another namespace's request wait behind all of it,
// while a namespace's progress passes its own backlog of new work. The same target is
// serialized: an event that arrives while its target is being handled, or
// waits, is held (newer ones replace it, and the replaced ones are acked),
// and the target is handled with the newest event (once more, right after,
// if it was being handled); Request.Coalesced counts the folded events.
//
// # Isolation of poisoned targets
//
// A target that keeps failing, timing out or never settling must not slow
// the others. Per target, each replica keeps (in memory, forgotten a minute
// after it has nothing left to remember):
//
//   - a backoff that grows with its consecutive failures (the WithBackoff
//     schedule, exponential and capped), whatever event brings it back: a
//     failing target whose own status writes publish new events, each at
//     delivery 1, still waits for its backoff;
//   - a budget of handler runs in any minute (WithTargetBudget, default
//     DefaultTargetBudget), whatever their outcome;
//   - whether it is suspect: it failed, or was throttled, within the last
//     minute (or its backoff has not ended a minute ago). Suspect targets run
//     only in a quarantine pool of their own slots (WithQuarantine, a
//     quarter of the concurrency by default, on top of it), so a poisoned
//     target holds a main slot at most for the run that found it out.
//
// A target that must wait for its backoff or budget is held in memory,
// holding no slot and no look-ahead room, with its newest event (and
// InProgress heartbeats), until its time. Metrics count the deferrals
// (loom.bus.targets.throttled, by reason), the runs by pool and outcome
// (loom.bus.handler.runs; pool resync for main-pool slots lent to resync
// requests), the time requests waited for a slot (loom.bus.queue.wait, by
// lane: urgent, normal, resync, quarantine), and the most runs one target had in a
// minute (loom.bus.target.runs_per_minute.max).
//
// # Outcomes
//
//   - success: Ack.
//   - Result.RequeueAfter: a copy of the event stamped Loom-Not-Before is
//     published in place of the original (a compare-and-set on the subject's
//     last sequence, so that it never replaces a newer event), and the
//     original is acked. The copy starts at delivery 1: requeues never count
//     towards MaxDeliver. A copy delivered early is Nak'd until its time.
//     No copy is published where one this lease published in another lane
//     of the target is still in the stream and comes back no later (within
//     a tenth of the delay, at most a second): a handler that waits for one
//     deadline whatever lane's event it handles keeps one timer. A later
//     run of the target that succeeds asking for no requeue makes the copies
//     this lease published before it moot: each is acked when it comes,
//     without a run (loom.bus.events.coalesced). The newest run's result is
//     the one that holds, as when a newer event supersedes a run and its
//     requeue is dropped. Copies that hand a result over are never moot.
//   - Result.Wait (no error): the target is held in memory with its newest
//     event unsettled (InProgress heartbeats), holding no slot and no
//     look-ahead room, until the channel is closed or RequeueAfter has
//     passed (reconcile.DefaultHoldTimeout by default), then handled again;
//     newer events meanwhile are folded into it. For a handler that waits on
//     its own process's state, such as the renderer's admission of a
//     tenant's new composed resources.
//   - error: NakWithDelay with exponential backoff (cenkalti/backoff, from the
//     delivery count), until delivery MaxDeliver, then dead-letter and Term.
//   - reconcile.Terminal(err): dead-letter and Term at once.
//   - a message that is not a valid event, or whose subject does not name the
//     event's target: dead-letter and Term at once.
//   - a message delivered more than MaxDeliver times (its handlers kept
//     crashing the process or timing out): dead-letter and Term.
//   - a handler cancelled because the replica gives the partition up: Nak, for
//     the next owner at once.
//
// The server never gives up on a message by itself (MaxDeliver -1 on the
// consumers): workers dead-letter instead, so nothing is left stuck in a
// work-queue stream. InProgress is sent every AckWait/3 while a handler runs
// (and for the event held behind it). A handler's context carries the
// event's trace and a span "handle <service>" with links to folded events;
// it is cancelled after WithHandlerTimeout or when the partition is fenced.
// Panics in handlers are recovered and count as errors.
//
// Metrics are OpenTelemetry instruments from the global MeterProvider
// (loom.bus.events.published, loom.bus.events.handled,
// loom.bus.handle.duration, loom.bus.events.coalesced, loom.bus.dead_letters,
// loom.bus.redeliveries, loom.bus.partitions.owned, and the gauges
// loom.bus.consumer.pending and loom.bus.consumer.ack_pending, read from
// JetStream for the urgent and normal lanes of the owned partitions at each
// collection: the lag KEDA scales on, which leaves the resync lane out);
// they cost nothing until a service installs a provider. Events are counted
// by service, target kind and outcome.
//
// Package bustest runs embedded NATS servers (single or clustered) for tests
// and benchmarks.
package bus
