package discovery

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Fleet positions from a control plane. A gateway whose config sets
// fleet.server asks that ADS server for its position instead of reading it
// from flags, the environment, the file or its hostname: on its own ADS
// stream it subscribes to one resource of type FleetType, named by its node
// id. The control plane (`corput control-plane`) assigns a dense position
// to each node id that subscribes and answers with a Struct of two number
// fields:
//
//	{"instance": 2, "size": 5}
//
// It sends the resource again whenever either value changes (a gateway
// joins, or one that left is compacted away), so every gateway of the
// fleet follows the size. xDS has no resource for this; a Struct keeps it
// readable by any xDS tooling (docs/control-plane.md, "Fleet position from
// the control plane").
const (
	// FleetType is the type URL of a fleet position resource.
	FleetType = "type.googleapis.com/google.protobuf.Struct"
	// KeyFleetInstance and KeyFleetSize are its fields.
	KeyFleetInstance = "instance"
	KeyFleetSize     = "size"
)

// MaxFleetSize bounds a fleet size read from a control plane.
const MaxFleetSize = 1 << 20

// FleetResource is the resource a control plane serves to the gateway at
// instance of size.
func FleetResource(instance, size int) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		KeyFleetInstance: structpb.NewNumberValue(float64(instance)),
		KeyFleetSize:     structpb.NewNumberValue(float64(size)),
	}}
}

// FleetFromResource reads a fleet position resource: both fields whole
// numbers, 0 ≤ instance < size ≤ MaxFleetSize.
func FleetFromResource(a *anypb.Any) (Fleet, error) {
	var s structpb.Struct
	if a.GetTypeUrl() != FleetType {
		return Fleet{}, fmt.Errorf("fleet position: type %q, want %s", a.GetTypeUrl(), FleetType)
	}
	if err := a.UnmarshalTo(&s); err != nil {
		return Fleet{}, fmt.Errorf("fleet position: %w", err)
	}
	field := func(key string) (int, error) {
		v, ok := s.GetFields()[key]
		if !ok {
			return 0, fmt.Errorf("fleet position: no %q field", key)
		}
		n, ok := v.GetKind().(*structpb.Value_NumberValue)
		if !ok || n.NumberValue != math.Trunc(n.NumberValue) || n.NumberValue < 0 || n.NumberValue > MaxFleetSize {
			return 0, fmt.Errorf("fleet position: %q is %v, want a whole number 0..%d", key, v.AsInterface(), MaxFleetSize)
		}
		return int(n.NumberValue), nil
	}
	inst, err := field(KeyFleetInstance)
	if err != nil {
		return Fleet{}, err
	}
	size, err := field(KeyFleetSize)
	if err != nil {
		return Fleet{}, err
	}
	if size < 1 || inst >= size {
		return Fleet{}, fmt.Errorf("fleet position: instance %d of size %d; want 0 ≤ instance < size", inst, size)
	}
	return Fleet{Instance: inst, Size: size, InstanceFrom: "control plane", SizeFrom: "control plane"}, nil
}
