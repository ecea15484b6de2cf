package localcluster

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct free loopback ports. All listeners are held
// open until every port is chosen, so that the kernel cannot hand the same
// port out twice; another process may still take one before our process
// binds it, which is rare enough to surface as a start error.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("localcluster: no free loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
