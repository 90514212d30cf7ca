//go:build linux || darwin

package matrix

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
)

// proc is one entry of the host's process listing: a pid and its
// arguments (argv; on macOS also the environment, which kern.procargs2
// returns after argv).
type proc struct {
	pid  int
	args []string
}

// tagged lists the processes, other than this one, with tag as one of
// their arguments. The listing is the OS's (listProcesses: /proc on Linux,
// sysctl on macOS); an error in it is returned, never read as "no
// survivors": on macOS, which has no /proc, a listing that silently came
// back empty would pass every survivor case.
func tagged(tag string) ([]int, error) {
	procs, err := listProcesses()
	if err != nil {
		return nil, err
	}
	return taggedIn(procs, os.Getpid(), func(a string) bool { return a == tag }), nil
}

// taggedIn returns the pids in procs, other than self, with an argument
// for which match is true.
func taggedIn(procs []proc, self int, match func(string) bool) []int {
	var pids []int
	for _, p := range procs {
		if p.pid <= 0 || p.pid == self {
			continue
		}
		for _, a := range p.args {
			if match(a) {
				pids = append(pids, p.pid)
				break
			}
		}
	}
	return pids
}

// parseProcArgs2 reads macOS's kern.procargs2: argc as a 32-bit integer
// in the machine's (little-endian) order, the executable's path, NUL
// padding, then argc arguments and the environment, each NUL-ended. It
// returns every string after the path. It is here, not in the darwin
// file, so that it is tested on Linux against constructed buffers.
func parseProcArgs2(b []byte) ([]string, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("kern.procargs2: %d bytes, too short", len(b))
	}
	argc := int(binary.LittleEndian.Uint32(b[:4]))
	rest := string(b[4:])
	_, rest, ok := strings.Cut(rest, "\x00")
	if !ok {
		return nil, fmt.Errorf("kern.procargs2: no end to the executable path")
	}
	rest = strings.TrimLeft(rest, "\x00")
	var out []string
	for rest != "" {
		s, tail, _ := strings.Cut(rest, "\x00")
		out = append(out, s)
		rest = tail
	}
	if len(out) < argc {
		return nil, fmt.Errorf("kern.procargs2: argc %d, %d strings", argc, len(out))
	}
	return out, nil
}
