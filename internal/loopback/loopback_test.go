package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortCanBeBound(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d from FreePort cannot be bound: %v", port, err)
	}
	l.Close()
}

// TestFreePortsAreOutsideTheEphemeralRange: outgoing connections take their source ports from
// the ephemeral range, so a port there can be gone before its process binds it; and no port is
// handed out twice, though each is free again once FreePort has closed its listener.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	start := ephemeralStart()
	seen := map[int]bool{}
	for range 500 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < lowest || port >= start {
			t.Fatalf("port %d is outside [%d, %d)", port, lowest, start)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
