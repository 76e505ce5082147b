package forward

import "testing"

func TestRetryBudget(t *testing.T) {
	b := NewBudget(20)
	for i := 0; i < 100; i++ {
		b.begin()
	}
	granted := 0
	for i := 0; i < 50; i++ {
		if b.tryRetry() {
			granted++
		}
	}
	if granted != 20 {
		t.Fatalf("granted %d retries with 100 active at 20%%, want 20", granted)
	}
	b.doneRetry()
	if !b.tryRetry() {
		t.Fatal("a finished retry did not free budget")
	}
	idle := NewBudget(20)
	n := 0
	for idle.tryRetry() {
		n++
	}
	if n != 3 {
		t.Fatalf("floor: %d retries with nothing active, want 3", n)
	}
}
