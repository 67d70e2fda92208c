package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// A member keeps its ports for life: RestartMember binds them again, and
// its peers and clients know them. While a member is stopped its ports
// are free, and a port the kernel hands out for ephemeral use (the local
// port of any outgoing connection, or a listener on port 0, in any test
// process of the machine) could take one, so that the restart fails with
// "address already in use". Members' ports are therefore drawn from below
// the kernel's ephemeral range (Linux: net.ipv4.ip_local_port_range),
// where only explicit binds land.

// memberPortFloor is the lowest port drawn for a member.
const memberPortFloor = 16384

// freePorts reserves n distinct free loopback ports below the ephemeral
// range, or anywhere if that range is unknown or leaves no room. The
// listeners are closed before the ports are used.
func freePorts(n int) ([]int, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	below, ok := ephemeralFloor()
	ranged := ok && below > memberPortFloor
	ports := make([]int, 0, n)
	for taken := 0; len(ports) < n; {
		addr := "127.0.0.1:0"
		if ranged {
			addr = "127.0.0.1:" + strconv.Itoa(memberPortFloor+rand.IntN(below-memberPortFloor))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if taken++; ranged && taken < 64 {
				continue // a port in use: draw another
			}
			return nil, fmt.Errorf("cluster: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralFloor returns the lowest port of the kernel's ephemeral range,
// and false if it cannot be read.
func ephemeralFloor() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil
}
