package bus

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// DecodeEvent decodes a work message's payload and checks that it names a
// target (or an object) whose UID can be a subject token.
func DecodeEvent(data []byte) (*eventsv1.Event, error) {
	ev := &eventsv1.Event{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("cannot decode event: %w", err)
	}
	tgt := ev.GetTarget()
	if tgt == nil {
		tgt = ev.GetObject()
	}
	if tgt == nil {
		return nil, errors.New("cannot accept event: it names neither a target nor an object")
	}
	if err := checkToken(tgt.GetUid()); err != nil {
		return nil, fmt.Errorf("cannot accept event: target UID %q %w", tgt.GetUid(), err)
	}
	return ev, nil
}
