package event

import (
	"sync"
	"sync/atomic"
	"time"
)

// Bus delivers each published event to every subscriber whose filter takes
// it. Publish never blocks: a subscriber whose buffer is full loses the
// event, counted in its Dropped and reported to the Bus's OnDrop.
type Bus struct {
	// OnDrop, when set before the first Subscribe, is told of each event a
	// subscriber lost (for a metric); it must not block.
	OnDrop func(subscriber string)

	mu   sync.Mutex
	seq  uint64
	subs map[*Subscription]struct{}
}

// Subscription is one subscriber's bounded queue of events.
type Subscription struct {
	bus     *Bus
	name    string
	filter  func(*Event) bool
	c       chan Event
	dropped atomic.Uint64
	once    sync.Once
}

// Subscribe adds a subscriber named name (for the drop metric) with room
// for buffer events (at least 1); filter, when non-nil, picks the events it
// gets. Close it when done.
func (b *Bus) Subscribe(name string, buffer int, filter func(*Event) bool) *Subscription {
	s := &Subscription{bus: b, name: name, filter: filter, c: make(chan Event, max(buffer, 1))}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[*Subscription]struct{}{}
	}
	b.subs[s] = struct{}{}
	return s
}

// Subscribers is how many subscriptions are open.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Publish numbers e, stamps its time when unset and offers it to every
// subscriber. It returns the event as delivered.
func (b *Bus) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	for s := range b.subs {
		if s.filter != nil && !s.filter(&e) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.dropped.Add(1)
			if b.OnDrop != nil {
				b.OnDrop(s.name)
			}
		}
	}
	return e
}

// C is the subscriber's events; it is closed by Close.
func (s *Subscription) C() <-chan Event { return s.c }

// Dropped is how many events this subscriber lost to a full buffer.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		close(s.c) // after removal: Publish holds mu while it sends
	})
}
