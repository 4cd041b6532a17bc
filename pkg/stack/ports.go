package stack

import (
	"fmt"
	"net"
	"sync"
)

// handedOut remembers every port this process has picked, so that two stacks
// in one test binary never get the same port even when the kernel would hand
// a just-closed port out again.
var handedOut = struct { //nolint:gochecknoglobals // Ports handed out by this process, shared by every stack it starts.
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago. The listeners are held open together while picking, so the ports
// differ from each other; a port can still be taken by another process
// before its user binds it, which callers treat as a start failure.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()

	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	// Bound the attempts: only ports this process already handed out are
	// skipped, so a few extra tries always suffice in practice.
	for attempts := 0; len(ports) < n && attempts < n+1000; attempts++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot pick a free port: %w", err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // A TCP listener's address is a *net.TCPAddr.
		if handedOut.ports[p] {
			continue
		}
		handedOut.ports[p] = true
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("cannot pick %d free ports", n)
	}
	return ports, nil
}

// freePort returns one port as freePorts does.
func freePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// hostPort joins 127.0.0.1 and port.
func hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
}
