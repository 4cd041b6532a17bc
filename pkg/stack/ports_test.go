package stack

import (
	"net"
	"testing"
)

func TestFreePorts(t *testing.T) {
	seen := map[int]bool{}
	for range 3 {
		ports, err := freePorts(5)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 5 {
			t.Fatalf("freePorts(5): got %d ports", len(ports))
		}
		for _, p := range ports {
			if seen[p] {
				t.Errorf("freePorts handed out port %d twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", hostPort(p))
			if err != nil {
				t.Errorf("port %d is not free: %v", p, err)
				continue
			}
			_ = l.Close()
		}
	}
}
