package pool

import "sync/atomic"

// links are the intrusive pointers that put a T on one list. Intrusive lists
// cost no allocation per push, and remove from the middle in O(1): the pool
// keeps its free connections and its waiters on them.
type links[T any] struct {
	prev, next *T
	on         bool
}

// linked is a pointer to a T that carries links.
type linked[T any] interface {
	*T
	links() *links[T]
}

// list is a doubly linked list of *T through their links. The zero value is
// empty. All guarded by Pool.mu; n is written under it and may also be read
// without it (Pool.Free).
type list[T any, P linked[T]] struct {
	head, tail *T
	n          atomic.Int32
}

func (l *list[T, P]) len() int { return int(l.n.Load()) }

func (l *list[T, P]) front() P { return l.head }

func (l *list[T, P]) back() P { return l.tail }

func (l *list[T, P]) pushBack(x P) {
	lx := x.links()
	lx.prev, lx.next, lx.on = l.tail, nil, true
	if l.tail != nil {
		P(l.tail).links().next = x
	} else {
		l.head = x
	}
	l.tail = x
	l.n.Store(l.n.Load() + 1)
}

func (l *list[T, P]) pushFront(x P) {
	lx := x.links()
	lx.prev, lx.next, lx.on = nil, l.head, true
	if l.head != nil {
		P(l.head).links().prev = x
	} else {
		l.tail = x
	}
	l.head = x
	l.n.Store(l.n.Load() + 1)
}

// remove takes x off the list; a no-op when x is not on it.
func (l *list[T, P]) remove(x P) {
	if !x.links().on {
		return
	}
	l.unlink(x)
	*x.links() = links[T]{}
	l.n.Store(l.n.Load() - 1)
}

// moveToBack puts x, which is on the list, at its back. n does not change
// on the way: a reader without the lock never sees the list one short.
func (l *list[T, P]) moveToBack(x P) {
	if P(l.tail) == x {
		return
	}
	l.unlink(x)
	lx := x.links()
	lx.prev, lx.next = l.tail, nil
	P(l.tail).links().next = x
	l.tail = x
}

// unlink joins x's neighbours (or the list's ends) to each other; x's own
// links and n are the caller's.
func (l *list[T, P]) unlink(x P) {
	lx := x.links()
	if lx.prev != nil {
		P(lx.prev).links().next = lx.next
	} else {
		l.head = lx.next
	}
	if lx.next != nil {
		P(lx.next).links().prev = lx.prev
	} else {
		l.tail = lx.prev
	}
}

func (l *list[T, P]) popFront() P {
	x := P(l.head)
	if x != nil {
		l.remove(x)
	}
	return x
}
