package forward

import "testing"

func TestParseLoad(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"TEXT cpu_utilization=0.83", 0.83, true},
		{"text cpu_utilization=0.9", 0.9, true},
		{"TEXT mem_utilization=0.4, cpu_utilization=0.25,named_metrics.q=3", 0.25, true},
		{"TEXT  cpu_utilization=1.5 ", 1.5, true},
		{"TEXT mem_utilization=0.4", 0, false},
		{"TEXT cpu_utilization=x", 0, false},
		{"TEXT cpu_utilization=-1", 0, false},
		{"TEXT cpu_utilization=NaN", 0, false},
		{"JSON {\"cpu_utilization\": 0.3}", 0, false},
		{"", 0, false},
	} {
		got, ok := ParseLoad(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseLoad(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if a := testing.AllocsPerRun(100, func() { ParseLoad("TEXT mem_utilization=0.4, cpu_utilization=0.25") }); a != 0 {
		t.Fatalf("ParseLoad allocates %.0f times, want 0", a)
	}
}
