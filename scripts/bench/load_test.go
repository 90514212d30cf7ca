//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLoadGoals: the summary reads the full-speed ratio and the paced p99
// from the runs of the same clients with and without the proxy, and says
// met or missed against 0.8x and 20 ms.
func TestLoadGoals(t *testing.T) {
	run := func(reqs int64, secs float64, lat ...time.Duration) loadRun {
		lr := loadRun{res: loadResult{Requests: reqs, Seconds: secs}}
		for _, l := range lat {
			lr.res.LatNS = append(lr.res.LatNS, int64(l))
		}
		return lr
	}
	ms := time.Millisecond
	for _, c := range []struct {
		name       string
		proxyRate  float64 // requests/s through the proxy at full speed; 1000 without
		pacedP99   time.Duration
		full, pace string
	}{
		{"met", 900, 10 * ms, "0.90x", "**met**"},
		{"missed", 500, 30 * ms, "0.50x", "**missed**"},
	} {
		r := &report{scale: &scaleResults{conns: 500, perConn: 10, rate: 1000, loads: map[string][]loadRun{
			lDirect:      {run(5000, 5, ms)},
			lProxy:       {run(5000, 5000/c.proxyRate, ms)},
			lDirectPaced: {run(5000, 5, ms)},
			lProxyPaced:  {run(5000, 5, c.pacedP99)},
		}, loadErr: map[string]error{}}}
		rows := r.loadGoals()
		if len(rows) != 2 {
			t.Fatalf("%s: %d rows, want 2: %v", c.name, len(rows), rows)
		}
		if !strings.HasPrefix(rows[0][1], c.full) || !strings.HasPrefix(rows[0][2], map[bool]string{true: "**met**", false: "**missed**"}[c.proxyRate >= 800]) {
			t.Errorf("%s: full-speed row %q", c.name, rows[0])
		}
		if !strings.HasPrefix(rows[1][2], c.pace) {
			t.Errorf("%s: paced row %q, want %s", c.name, rows[1], c.pace)
		}
		var b strings.Builder
		r.loadTable(func(f string, a ...any) { b.WriteString(fmt.Sprintf(f, a...)) })
		for _, want := range []string{lProxyPaced, "**" + c.full + "**", "Paced at 1000 requests per second"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s: the section lacks %q:\n%s", c.name, want, b.String())
			}
		}
	}
}
