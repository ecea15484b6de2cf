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
	"net"
	"strconv"
	"testing"
)

// TestFreePortsAreOutsideTheEphemeralRange: the ports are distinct, free
// (a program can bind each), and where the kernel says which ports it
// hands out by itself, none of them is one.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	ports, err := FreePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d returned twice", p)
		}
		seen[p] = true
		if low > lowestPort+1000 && (p < lowestPort || p >= low) {
			t.Errorf("port %d is outside [%d, %d): an outgoing connection may take it", p, lowestPort, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free after FreePorts returned it: %v", p, err)
			continue
		}
		l.Close()
	}
	if len(ports) != 50 {
		t.Errorf("got %d ports, want 50", len(ports))
	}
}
