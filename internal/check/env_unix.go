//go:build linux || darwin

package check

import "time"

// timed runs one probe and records how long it took in its DurationMS, so
// a slow probe shows in check's output instead of only as a slow check.
func timed(probe func() Item) Item {
	start := time.Now()
	it := probe()
	it.DurationMS = time.Since(start).Milliseconds()
	return it
}
