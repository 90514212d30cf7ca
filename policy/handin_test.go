package policy

import "testing"

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"5432", "127.0.0.1:5432", true},
		{"127.0.0.2:80", "127.0.0.2:80", true},
		{"[::1]:8080", "[::1]:8080", true},
		{"10.0.0.1:80", "", false},  // not loopback
		{"0", "", false},            // no port 0
		{"05432", "", false},        // not written plainly
		{"65536", "", false},        // out of range
		{"localhost:80", "", false}, // an address, not a name
		{"[fe80::1%lo]:80", "", false},
	}
	for _, tt := range tests {
		got, err := ParseHostPort(tt.in)
		if (err == nil) != tt.ok || tt.ok && got.String() != tt.want {
			t.Errorf("ParseHostPort(%q) = %v, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParsePublish(t *testing.T) {
	tests := []struct {
		in        string
		in2, host uint16
		ok        bool
	}{
		{"8080", 8080, 8080, true},
		{"8080:18080", 8080, 18080, true},
		{"8080:", 0, 0, false},
		{":8080", 0, 0, false},
		{"0:80", 0, 0, false},
		{"a", 0, 0, false},
	}
	for _, tt := range tests {
		in, host, err := ParsePublish(tt.in)
		if (err == nil) != tt.ok || in != tt.in2 || host != tt.host {
			t.Errorf("ParsePublish(%q) = %d, %d, %v; want %d, %d ok=%v", tt.in, in, host, err, tt.in2, tt.host, tt.ok)
		}
	}
}

func TestValidateHandIn(t *testing.T) {
	base := Policy{Workdir: "/w"}
	tests := []struct {
		name string
		h    HandIn
		mode Mode
		ok   bool
	}{
		{"host port", HandIn{HostPorts: []string{"5432"}}, "", true},
		{"reserved port", HandIn{HostPorts: []string{"3128"}}, "", false},
		{"twice", HandIn{HostPorts: []string{"5432", "127.0.0.1:5432"}}, "", false},
		{"publish loops onto a host port", HandIn{HostPorts: []string{"9000"}, Publish: []string{"80:9000"}}, "", false},
		{"publish twice", HandIn{Publish: []string{"80:9000", "81:9000"}}, "", false},
		{"relative socket", HandIn{UnixSockets: []string{"a.sock"}}, "", false},
		{"under gvisor", HandIn{UnixSockets: []string{"/run/a.sock"}}, ModeGvisor, true},
		{"under bwrap", HandIn{UnixSockets: []string{"/run/a.sock"}}, ModeBwrap, true},
		{"under landlock", HandIn{UnixSockets: []string{"/run/a.sock"}}, ModeLandlock, false},
		{"publish under seatbelt", HandIn{Publish: []string{"80"}}, ModeSeatbelt, false},
	}
	for _, tt := range tests {
		p := base
		p.HandIn, p.Sandbox = tt.h, tt.mode
		if err := p.validateHandIn(); (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
