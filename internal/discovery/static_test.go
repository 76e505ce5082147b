package discovery

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestStaticEmitsSortedOnceAndWaits(t *testing.T) {
	in := []Endpoint{{Address: "b:1", Zone: "z", Weight: 2}, {Address: "a:1", Zone: "y", Weight: 1}}
	s, err := NewStatic("payments", in)
	if err != nil {
		t.Fatal(err)
	}
	in[0].Address = "mutated:1" // the source owns its copy
	ctx, cancel := context.WithCancel(context.Background())
	var got []Update
	done := make(chan error)
	go func() { done <- s.Run(ctx, func(u Update) { got = append(got, u) }) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{{Address: "a:1", Zone: "y", Weight: 1}, {Address: "b:1", Zone: "z", Weight: 2}}
	if len(got) != 1 || got[0].Origin != "payments" || !slices.Equal(got[0].Endpoints, want) {
		t.Fatalf("got %v, want one update %v", got, want)
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
}

func TestStaticRejectsInvalid(t *testing.T) {
	for _, c := range []struct {
		in   []Endpoint
		want string
	}{
		{[]Endpoint{{Address: "a:1", Zone: "", Weight: 0}}, "weight 0 is outside 1..1000000"},
		{[]Endpoint{{Address: "a", Zone: "", Weight: 1}}, "not host:port"},
		{[]Endpoint{{Address: ":80", Zone: "", Weight: 1}}, "no host"},
		{[]Endpoint{{Address: "a:70000", Zone: "", Weight: 1}}, "1..65535"},
		{[]Endpoint{{Address: "a:1", Zone: "", Weight: 1}, {Address: "a:1", Zone: "x", Weight: 2}}, "listed twice"},
	} {
		_, err := NewStatic("payments", c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "origin payments") {
			t.Errorf("%v: err = %v; want it to name the origin and contain %q", c.in, err, c.want)
		}
	}
}
