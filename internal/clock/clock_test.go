package clock

import (
	"context"
	"runtime"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresInDeadlineOrderWithNowAtDeadline(t *testing.T) {
	f := NewFake(epoch)
	var got []time.Duration
	rec := func() { got = append(got, f.Now().Sub(epoch)) }
	f.AfterFunc(3*time.Second, rec)
	f.AfterFunc(1*time.Second, rec)
	f.AfterFunc(2*time.Second, func() {
		rec()
		f.AfterFunc(500*time.Millisecond, rec) // armed by a callback, due inside the advance
	})
	f.Advance(5 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 2500 * time.Millisecond, 3 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	if now := f.Now().Sub(epoch); now != 5*time.Second {
		t.Fatalf("now = %v, want 5s", now)
	}
}

func TestFakeStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	n := 0
	tm := f.AfterFunc(time.Second, func() { n++ })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	f.Advance(2 * time.Second)
	if n != 0 {
		t.Fatal("stopped timer fired")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported pending")
	}
	f.Advance(999 * time.Millisecond)
	if n != 0 {
		t.Fatal("fired early")
	}
	f.Advance(time.Millisecond)
	if n != 1 {
		t.Fatalf("fired %d times, want 1", n)
	}
}

func TestFakeStepJumpsToNextEvent(t *testing.T) {
	f := NewFake(epoch)
	if f.Step() {
		t.Fatal("Step with nothing pending reported true")
	}
	fired := 0
	f.AfterFunc(time.Minute, func() { fired++ })
	f.AfterFunc(time.Minute, func() { fired++ })
	f.AfterFunc(time.Hour, func() { fired++ })
	if !f.Step() || fired != 2 || f.Now() != epoch.Add(time.Minute) {
		t.Fatalf("after Step: fired=%d now=%v", fired, f.Now())
	}
	if f.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", f.Pending())
	}
}

func TestRealAfterFunc(t *testing.T) {
	done := make(chan struct{})
	Real().AfterFunc(0, func() { close(done) })
	<-done
}

func TestFakeHeapOrderUnderRandomStopsAndResets(t *testing.T) {
	f := NewFake(epoch)
	var fired []int
	timers := make([]Timer, 200)
	for i := range timers {
		i := i
		timers[i] = f.AfterFunc(time.Duration((i*7919)%500)*time.Millisecond, func() { fired = append(fired, i) })
	}
	for i := 0; i < 200; i += 3 {
		timers[i].Stop()
	}
	for i := 1; i < 200; i += 5 {
		timers[i].Reset(time.Duration((i*104729)%700) * time.Millisecond)
	}
	var last time.Time
	for f.Step() {
		if f.Now().Before(last) {
			t.Fatal("time went backwards")
		}
		last = f.Now()
	}
	want := 0
	for i := 0; i < 200; i++ {
		if i%3 != 0 || (i-1)%5 == 0 {
			want++
		}
	}
	if len(fired) != want {
		t.Fatalf("fired %d timers, want %d", len(fired), want)
	}
}

func BenchmarkFakeSchedule(b *testing.B) {
	f := NewFake(epoch)
	for i := 0; i < 100000; i++ {
		f.AfterFunc(time.Duration(i%1000)*time.Second, func() {})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.AfterFunc(time.Duration(i%997)*time.Millisecond, func() {})
		f.Step()
	}
}

// TestSleepWaitsOnTheClock: Sleep (the retry backoff's wait) ends when the
// clock has moved by d, not before, and at once when its context ends.
func TestSleepWaitsOnTheClock(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan bool)
	go func() { done <- Sleep(context.Background(), f, 25*time.Millisecond) }()
	for f.Pending() == 0 {
		runtime.Gosched()
	}
	f.Advance(24 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Sleep ended before the clock moved by its wait")
	default:
	}
	f.Advance(time.Millisecond)
	if !<-done {
		t.Fatal("Sleep reported its context ended")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, f, time.Hour) }()
	cancel()
	if <-done {
		t.Fatal("a cancelled Sleep reported its course run")
	}
}
