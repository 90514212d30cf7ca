package cli

import (
	"strings"
	"unsafe"
)

// scrubEnvValues overwrites, in place, the value part of every --env
// argument in args, so that a secret a caller passed with --env stops
// showing in /proc/PID/cmdline once the flags are parsed. (A caller who
// cannot accept even that short window uses --pass-env or a profile.)
//
// args must be the process's own argv as the Go runtime received it
// (os.Args[1:]): those strings are not copies but the bytes the kernel placed
// on the initial stack, which are writable and which /proc/PID/cmdline reads.
// It is sound only because every value taken from them has been cloned
// (see runFlags.policy) before this runs; no other code holds them.
func scrubEnvValues(args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return
		}
		var val string
		switch {
		case a == "--env" && i+1 < len(args):
			i++
			val = args[i]
		case strings.HasPrefix(a, "--env="):
			val = a[len("--env="):]
		default:
			continue
		}
		if eq := strings.IndexByte(val, '='); eq >= 0 && eq+1 < len(val) {
			b := unsafe.Slice(unsafe.StringData(val), len(val))
			for j := eq + 1; j < len(b); j++ {
				b[j] = '*'
			}
		}
	}
}
