package bus

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Partition is the partition of a target: fnv-1a (32 bit) of its UID modulo
// the partition count. Every publisher and worker computes it the same way, so
// all work for one target goes through one partition consumer.
func Partition(uid string, partitions int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return int(h.Sum32() % uint32(partitions)) //nolint:gosec // Partition counts are small and positive (Config.Validate).
}

// WorkSubject is the subject of a work request for a target:
// loom.<service>.<partition>.<uid>. UIDs, not names, are subject tokens,
// because Kubernetes names may contain dots.
func WorkSubject(service string, partitions int, uid string) string {
	return fmt.Sprintf("%s.%s.%d.%s", subjectPrefix, service, Partition(uid, partitions), uid)
}

// urgentToken ends the subject of a request in its target's urgent lane.
const urgentToken = "urgent"

// UrgentWorkSubject is the subject of an urgent work request for a target
// (eventsv1.Event.Urgent): loom.<service>.<partition>.<uid>.urgent. A target
// has at most one request in each lane; every lane of a partition is
// consumed by its owner, the urgent one first.
func UrgentWorkSubject(service string, partitions int, uid string) string {
	return WorkSubject(service, partitions, uid) + "." + urgentToken
}

// resyncToken ends the subject of a request in its target's resync lane.
const resyncToken = "resync"

// ResyncWorkSubject is the subject of a resync request for a target
// (eventsv1.EventType_EVENT_TYPE_RESYNC: nothing is known to have changed):
// loom.<service>.<partition>.<uid>.resync. The owner of a partition serves
// its resync lane only with main-pool slots no urgent or normal request
// waits for, so that a periodic full resync never delays a real change.
func ResyncWorkSubject(service string, partitions int, uid string) string {
	return WorkSubject(service, partitions, uid) + "." + resyncToken
}

// overflowToken ends the subject of a request in its target's overflow
// lane: where the owner of a partition moves an event of a tenant that held
// its share of the partition's full urgent or normal lane (see
// lease.takeRoom), so that the lane reads on past that tenant's backlog: loom.<service>.<partition>.<uid>[_handover].overflow. Only
// workers publish there.
const overflowToken = "overflow"

// overflowSubject is the subject, in the overflow lane, of a request of the
// urgent or normal lane. A request moved from the urgent lane stays urgent:
// its event says so (eventsv1.Event.Urgent).
func overflowSubject(subject string) string {
	return strings.TrimSuffix(subject, "."+urgentToken) + "." + overflowToken
}

// handOverSuffix ends the last token of the subject of a request that
// hands a result over (eventsv1.Event.Publication).
const handOverSuffix = "_handover"

// HandOverWorkSubject is the subject of a request that hands a result over
// to the target's service (eventsv1.Event.Publication: what the secrets
// service published for an XR): loom.<service>.<partition>.<uid>_handover.
// It is a subject of its own so that the stream, which keeps one message
// per subject, never replaces it with a later event of the target before
// the worker has received it; the worker then serves it in the target's
// normal lane and keeps its hand-over in whatever newer event it is folded
// into. UIDs never hold '_'.
func HandOverWorkSubject(service string, partitions int, uid string) string {
	return WorkSubject(service, partitions, uid) + handOverSuffix
}

// DeadLetterSubject is the dead-letter subject of a service: loom.dlq.<service>.
func DeadLetterSubject(service string) string {
	return fmt.Sprintf("%s.%s.%s", subjectPrefix, dlqToken, service)
}

// partitionFilter is the filter subject of one partition consumer.
func partitionFilter(service string, partition int) string {
	return fmt.Sprintf("%s.%s.%d.*", subjectPrefix, service, partition)
}

// parseWorkSubject splits a work subject, of any lane, into its service,
// partition and target UID.
func parseWorkSubject(subject string) (service string, partition int, uid string, err error) {
	parts := strings.Split(subject, ".")
	if len(parts) == 5 && (parts[4] == urgentToken || parts[4] == resyncToken || parts[4] == overflowToken) {
		parts = parts[:4]
	}
	if len(parts) != 4 || parts[0] != subjectPrefix || parts[1] == dlqToken {
		return "", 0, "", fmt.Errorf("cannot parse work subject %q: want %s.<service>.<partition>.<uid>[%s][.%s|.%s|.%s]", subject, subjectPrefix, handOverSuffix, urgentToken, resyncToken, overflowToken)
	}
	parts[3] = strings.TrimSuffix(parts[3], handOverSuffix)
	p, err := strconv.Atoi(parts[2])
	if err != nil || p < 0 {
		return "", 0, "", fmt.Errorf("cannot parse work subject %q: bad partition %q", subject, parts[2])
	}
	return parts[1], p, parts[3], nil
}

// errBadToken says a value cannot be a NATS subject token.
var errBadToken = errors.New("must be non-empty and contain only letters, digits, '-' and '_'")

// checkToken reports whether s can be used as one subject token. Kubernetes
// UIDs (RFC 4122 strings) always can.
func checkToken(s string) error {
	if s == "" {
		return errBadToken
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !tokenByte(c) {
			return errBadToken
		}
	}
	return nil
}

// checkKeyPart reports whether s can be part of a key-value key (replica IDs
// are): dot-separated tokens of letters, digits, '-' and '_'.
func checkKeyPart(s string) error {
	for _, t := range strings.Split(s, ".") {
		if checkToken(t) != nil {
			return errors.New("must be dot-separated tokens of letters, digits, '-' and '_'")
		}
	}
	return nil
}

// tokenByte reports whether c may appear in a subject token: ASCII letters,
// digits, '-' and '_'.
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
