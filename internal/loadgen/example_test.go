package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/workload"
)

// A mix without cost skew is not evidence: Run refuses it before sending
// anything.
func ExampleRun_uniformRefused() {
	uniform, _ := workload.Load("uniform")
	_, err := loadgen.Run(context.Background(), loadgen.Options{
		Target: "http://127.0.0.1:9", Rate: 100, Duration: time.Second, Mix: uniform,
	})
	fmt.Println(errors.Is(err, workload.ErrNoSkew))
	// Output: true
}
