/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowestPort is the bottom of the pool FreePorts draws from: above the
// ports people give their own services by hand.
const lowestPort = 10000

// FreePorts returns n distinct free loopback ports. They are drawn at
// random from below the kernel's ephemeral range, where no outgoing
// connection of any process can take one between our check and the bind
// of the program we give it to (a port that "127.0.0.1:0" handed out can
// be, and was: a controller exited with "address already in use"). All
// listeners are held open until every port is chosen, so the same port is
// not returned twice; another process of ours may still bind one first,
// which is rare enough to surface as a start error.
func FreePorts(n int) ([]int, error) {
	top := ephemeralLow()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if top-lowestPort >= 1000 && tries < 100*n {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lowestPort+rand.IntN(top-lowestPort)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, fmt.Errorf("localcluster: no free loopback port: %w", err)
			}
			continue
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralLow is the lowest port the kernel hands to outgoing connections
// and to "port 0", or 0 where that is not known (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}
