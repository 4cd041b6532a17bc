package bus

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	cases := map[string]struct {
		reason  string
		cfg     Config
		want    Config
		wantErr string
	}{
		"Zero": {
			reason: "the zero Config takes every default",
			want: Config{Replicas: 1, Partitions: 32, MaxDeliver: 10, AckWait: 10 * time.Second,
				DuplicateWindow: 2 * time.Minute, LeaseTTL: 6 * time.Second,
				DeadLetterMaxAge: 14 * 24 * time.Hour, DeadLetterMaxMsgs: 100_000},
		},
		"Cluster": {
			reason: "three replicas are kept",
			cfg:    Config{Replicas: 3, Partitions: 8},
			want: Config{Replicas: 3, Partitions: 8, MaxDeliver: 10, AckWait: 10 * time.Second,
				DuplicateWindow: 2 * time.Minute, LeaseTTL: 6 * time.Second,
				DeadLetterMaxAge: 14 * 24 * time.Hour, DeadLetterMaxMsgs: 100_000},
		},
		"TooManyReplicas": {
			reason:  "JetStream allows at most five replicas",
			cfg:     Config{Replicas: 7},
			wantErr: "replicas must be between 1 and 5",
		},
		"ShortLease": {
			reason:  "leases shorter than a second leave no room to renew",
			cfg:     Config{LeaseTTL: 500 * time.Millisecond},
			wantErr: "lease TTL must be at least 1s",
		},
		"NegativeEverything": {
			reason:  "every invalid field is reported at once",
			cfg:     Config{Partitions: -1, MaxDeliver: -1},
			wantErr: "partitions must be between 1 and 1024, not -1\nmax deliver must be at least 1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.cfg.withDefaults()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s: got error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSubjects(t *testing.T) {
	const u = "6f1d3c2a-9b8e-4f7a-a1b2-c3d4e5f60718"
	p := Partition(u, 32)
	cases := map[string]struct {
		reason string
		got    string
		want   string
	}{
		"Work":       {reason: "work subjects carry service, partition and UID", got: WorkSubject(Renderer, 32, u), want: fmt.Sprintf("loom.renderer.%d.%s", p, u)},
		"DeadLetter": {reason: "dead letters are per service", got: DeadLetterSubject(Binder), want: "loom.dlq.binder"},
		"Stream":     {reason: "streams are upper case", got: StreamName(Secrets), want: "LOOM_SECRETS"},
		"Consumer":   {reason: "consumers are numbered with two digits", got: ConsumerName(Renderer, 7), want: "renderer-p07"},
		"Filter":     {reason: "a partition consumer sees only its own targets", got: partitionFilter(Binder, 3), want: "loom.binder.3.*"},
		"Resync":     {reason: "a resync lane's subjects end in resync", got: ResyncWorkSubject(Renderer, 32, u), want: fmt.Sprintf("loom.renderer.%d.%s.resync", p, u)},
		"HandOver":   {reason: "a hand-over has a subject of its own that the partition's normal consumer sees", got: HandOverWorkSubject(Renderer, 32, u), want: fmt.Sprintf("loom.renderer.%d.%s_handover", p, u)},
		"ResyncConsumer": {reason: "a resync lane has its own consumer, on its own subjects", got: fmt.Sprint(ResyncConsumerName(Binder, 3), " ", Config{}.resyncConsumerConfig(Binder, 3).FilterSubject),
			want: "binder-p03-resync loom.binder.3.*.resync"},
		"OverflowConsumer": {reason: "an overflow lane has its own consumer, on its own subjects, normal and hand-over alike", got: fmt.Sprint(OverflowConsumerName(Binder, 3), " ", Config{}.overflowConsumerConfig(Binder, 3).FilterSubject, " ", overflowSubject(HandOverWorkSubject(Binder, 32, u))),
			want: fmt.Sprintf("binder-p03-overflow loom.binder.3.*.overflow loom.binder.%d.%s_handover.overflow", p, u)},
		"OverflowFromUrgent": {reason: "an urgent request moved to the overflow lane shares its target's overflow subject", got: overflowSubject(UrgentWorkSubject(Binder, 32, u)), want: fmt.Sprintf("loom.binder.%d.%s.overflow", p, u)},
		"UrgentConsumer": {reason: "the urgent lane's consumer keeps its name and subjects", got: fmt.Sprint(Config{}.urgentConsumerConfig(Binder, 3).Durable, " ", Config{}.urgentConsumerConfig(Binder, 3).FilterSubject),
			want: "binder-p03-urgent loom.binder.3.*.urgent"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	// fnv-1a is fixed: publishers and workers in different processes (and
	// versions) must agree. This value was computed independently.
	if got := Partition("a", 1<<31); got != int(0xe40c292c%(1<<31)) {
		t.Errorf("Partition(a) = %d; fnv-1a changed", got)
	}
	for _, subject := range []string{WorkSubject(Renderer, 32, u), UrgentWorkSubject(Renderer, 32, u), ResyncWorkSubject(Renderer, 32, u), HandOverWorkSubject(Renderer, 32, u),
		overflowSubject(WorkSubject(Renderer, 32, u)), overflowSubject(UrgentWorkSubject(Renderer, 32, u)), overflowSubject(HandOverWorkSubject(Renderer, 32, u))} {
		svc, part, id, err := parseWorkSubject(subject)
		if err != nil || svc != Renderer || part != p || id != u {
			t.Errorf("parseWorkSubject(%s) round trip: %s %d %s %v", subject, svc, part, id, err)
		}
	}
}

// An event goes to the lane its type and urgency ask for; a resync is
// never urgent, whatever it says, for nothing is known to have changed.
func TestPublishLane(t *testing.T) {
	const u = "6f1d3c2a-9b8e-4f7a-a1b2-c3d4e5f60718"
	cases := map[string]struct {
		reason      string
		typ         eventsv1.EventType
		urgent      bool
		publication bool
		want        string
	}{
		"Change":       {reason: "a change goes to the normal lane", typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, want: WorkSubject(Binder, 32, u)},
		"UrgentChange": {reason: "an urgent change goes to the urgent lane", typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, urgent: true, want: UrgentWorkSubject(Binder, 32, u)},
		"Resync":       {reason: "a resync goes to the resync lane", typ: eventsv1.EventType_EVENT_TYPE_RESYNC, want: ResyncWorkSubject(Binder, 32, u)},
		"UrgentResync": {reason: "a resync marked urgent still goes to the resync lane", typ: eventsv1.EventType_EVENT_TYPE_RESYNC, urgent: true, want: ResyncWorkSubject(Binder, 32, u)},
		"HandOver":     {reason: "a hand-over goes to a subject of its own, urgent or not", typ: eventsv1.EventType_EVENT_TYPE_REQUEUE, urgent: true, publication: true, want: HandOverWorkSubject(Binder, 32, u)},
	}
	p := NewPublisher(nil, WithConfig(Config{Partitions: 32}))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ev := &eventsv1.Event{Object: &eventsv1.ObjectRef{Kind: "XThing", Name: "x", Uid: u}, ResourceVersion: "1", Type: tc.typ, Urgent: tc.urgent}
			if tc.publication {
				ev.Publication = &eventsv1.Publication{Status: "True", Reason: "Published"}
			}
			msg, err := p.message(Binder, ev)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, msg.Subject); diff != "" {
				t.Errorf("%s: subject -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// Rendezvous hashing spreads partitions evenly and moves only the joining
// or leaving replica's share.
func TestOwnerAssignment(t *testing.T) {
	const partitions = 32
	assign := func(replicas ...string) map[int]string {
		m := map[int]string{}
		for p := range partitions {
			m[p] = owner(Renderer, p, replicas)
		}
		return m
	}
	three := assign("r0", "r1", "r2")
	count := map[string]int{}
	for _, r := range three {
		count[r]++
	}
	for _, r := range []string{"r0", "r1", "r2"} {
		if count[r] < 5 || count[r] > 17 {
			t.Errorf("replica %s owns %d of %d partitions; want a fair share", r, count[r], partitions)
		}
	}
	two := assign("r0", "r2")
	for p, r := range three {
		if r != "r1" && two[p] != r {
			t.Errorf("partition %d moved from %s to %s when r1 left", p, r, two[p])
		}
	}
	four := assign("r0", "r1", "r2", "r3")
	for p, r := range four {
		if r != "r3" && three[p] != r {
			t.Errorf("partition %d moved from %s to %s when r3 joined", p, three[p], r)
		}
	}
	if owner(Renderer, 0, nil) != "" {
		t.Errorf("a partition with no replicas has an owner")
	}
}

func TestHeaderCarrier(t *testing.T) {
	h := nats.Header{}
	c := HeaderCarrier(h)
	c.Set("traceparent", "00-0102-03-01")
	c.Set("Traceparent", "other")
	if got := c.Get("traceparent"); got != "00-0102-03-01" {
		t.Errorf("Get(traceparent) = %q; keys must be case-sensitive", got)
	}
	if got := len(c.Keys()); got != 2 {
		t.Errorf("Keys() has %d keys, want 2", got)
	}
	if got := c.Get("missing"); got != "" {
		t.Errorf("Get(missing) = %q", got)
	}
}

func TestDecodeRequest(t *testing.T) {
	const u = "6f1d3c2a-9b8e-4f7a-a1b2-c3d4e5f60718"
	const xr = "0a1b2c3d-0000-4000-8000-000000000001"
	enc := func(ev *eventsv1.Event) []byte {
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	obj := &eventsv1.ObjectRef{Kind: "NopResource", Name: "a.b", Uid: u}
	cases := map[string]struct {
		reason     string
		subject    string
		data       []byte
		wantTarget string
		wantErr    string
	}{
		"Object": {
			reason: "an event without a target targets its object", subject: WorkSubject(Renderer, 32, u),
			data: enc(&eventsv1.Event{Object: obj}), wantTarget: u,
		},
		"Target": {
			reason: "a target wins over the object", subject: WorkSubject(Renderer, 32, xr),
			data: enc(&eventsv1.Event{Object: obj, Target: &eventsv1.ObjectRef{Uid: xr}}), wantTarget: xr,
		},
		"SubjectMismatch": {
			reason: "a subject naming another target would break exclusivity", subject: WorkSubject(Renderer, 32, xr),
			data: enc(&eventsv1.Event{Object: obj}), wantErr: "subject names target",
		},
		"Garbage": {
			reason: "bytes that are not protobuf", subject: WorkSubject(Renderer, 32, u),
			data: []byte{0xff, 0xff, 0xff}, wantErr: "cannot decode event",
		},
		"Empty": {
			reason: "an event naming nothing", subject: WorkSubject(Renderer, 32, u),
			data: nil, wantErr: "neither a target nor an object",
		},
		"BadSubject": {
			reason: "a subject outside the work layout", subject: "loom.renderer." + u,
			data: enc(&eventsv1.Event{Object: obj}), wantErr: "cannot parse work subject",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, tgt, err := decodeRequest(tc.subject, tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s: got error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.wantTarget, tgt.GetUid()); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzDecodeRequest checks that no payload or subject makes decoding panic,
// and that whatever it accepts names a routable target on that subject.
func FuzzDecodeRequest(f *testing.F) {
	const u = "6f1d3c2a-9b8e-4f7a-a1b2-c3d4e5f60718"
	good, _ := proto.Marshal(&eventsv1.Event{Object: &eventsv1.ObjectRef{Uid: u}, ResourceVersion: "5"})
	f.Add(WorkSubject(Renderer, 32, u), good)
	f.Add("loom.binder.1.x", []byte{})
	f.Add("loom.dlq.renderer", []byte{0x0a, 0x02, 0x32, 0x00})
	f.Add("", []byte{0xff})
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		ev, tgt, err := decodeRequest(subject, data)
		if err != nil {
			return
		}
		if ev == nil || tgt == nil || checkToken(tgt.GetUid()) != nil || !strings.HasSuffix(subject, "."+tgt.GetUid()) {
			t.Errorf("accepted %q on %q with target %v", data, subject, tgt)
		}
	})
}

func TestHeaderValue(t *testing.T) {
	got := headerValue("line one\nline two\r\n" + strings.Repeat("x", 3000))
	if strings.ContainsAny(got, "\r\n") || len(got) > maxReason {
		t.Errorf("headerValue left a newline or %d bytes", len(got))
	}
}
