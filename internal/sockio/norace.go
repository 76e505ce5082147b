//go:build !race

package sockio

func beforeWrite() {}
func afterRead()   {}
