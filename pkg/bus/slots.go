package bus

import "sync"

// slots bounds how many handlers of a Worker run at once. A freed slot goes
// to a waiting urgent request first, then to the longest-waiting other one,
// so that urgent work never queues behind the backlog of its partitions.
type slots struct {
	mu     sync.Mutex
	free   int
	urgent []chan struct{} // waiters, oldest first; closed when granted
	normal []chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n} }

// acquire takes a slot, waiting for one if none is free; it returns false,
// holding none, if quit is closed first. A request that waits as not urgent
// becomes urgent when upgrade is closed (an urgent event for its target
// arrived meanwhile).
func (s *slots) acquire(urgent bool, quit, upgrade <-chan struct{}) bool {
	s.mu.Lock()
	if s.free > 0 && (urgent || len(s.urgent) == 0) {
		s.free--
		s.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	if urgent {
		s.urgent = append(s.urgent, ch)
	} else {
		s.normal = append(s.normal, ch)
	}
	s.mu.Unlock()

	if urgent {
		upgrade = nil
	}
	for waiting := true; waiting; {
		select {
		case <-ch:
			return true
		case <-quit:
			waiting = false
		case <-upgrade:
			upgrade = nil
			s.mu.Lock()
			if l, ok := remove(s.normal, ch); ok {
				s.normal = l
				s.urgent = append(s.urgent, ch)
				urgent = true
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	removed := false
	if urgent {
		s.urgent, removed = remove(s.urgent, ch)
	} else {
		s.normal, removed = remove(s.normal, ch)
	}
	s.mu.Unlock()
	if !removed {
		// Granted just as quit closed: hand the slot on.
		s.release()
	}
	return false
}

// release frees a slot, or hands it to the next waiter.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.urgent) > 0:
		close(s.urgent[0])
		s.urgent = s.urgent[1:]
	case len(s.normal) > 0:
		close(s.normal[0])
		s.normal = s.normal[1:]
	default:
		s.free++
	}
}

// waiting returns how many urgent and other requests wait for a slot.
func (s *slots) waiting() (urgent, normal int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.urgent), len(s.normal)
}

func remove(l []chan struct{}, ch chan struct{}) ([]chan struct{}, bool) {
	for i, c := range l {
		if c == ch {
			return append(l[:i], l[i+1:]...), true
		}
	}
	return l, false
}
