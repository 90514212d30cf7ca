//go:build linux || darwin

package matrix

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/probe"
)

// TestPortCanaryJudge runs the udp-proxy-port probe unconfined through
// launchPortCanary: the canary bound at the address the proxy variable
// names receives the probe's datagram, and the judgement follows what the
// canary received, not what the probe says; a probe without a proxy
// variable gives no verdict (untested, never held); a port another socket
// holds is a missing canary.
func TestPortCanaryJudge(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	held, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	run := func(env []string, payload string) (probeRun, error) {
		cmd := exec.Command(bin, probe.Arg, "udp-proxy-port", "payload-sent")
		cmd.Env = env
		cmd.WaitDelay = 2 * time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		return launchPortCanary(cmd, &stderr, payload, 300*time.Millisecond)
	}
	proxyEnv := "HTTP_PROXY=http://" + tcp.Addr().String()

	pr, err := run([]string{proxyEnv}, "payload-sent")
	if err != nil || pr.verdict == "" || !pr.subs["port-canary"] {
		t.Errorf("the control's datagram: err %v, verdict %q, subs %v, lines %q; want the canary to have received it", err, pr.verdict, pr.subs, pr.lines)
	}
	pr, err = run([]string{proxyEnv}, "payload-not-sent")
	if err != nil || pr.verdict == "" || pr.subs["port-canary"] || len(pr.order) != 1 {
		t.Errorf("judged on another payload: err %v, verdict %q, subs %v; want a verdict with the canary not reached, whatever the probe saw", err, pr.verdict, pr.subs)
	}
	pr, err = run([]string{"PATH=/usr/bin:/bin"}, "payload-sent")
	if err != nil || pr.verdict != "" || len(pr.subs) != 0 {
		t.Errorf("without a proxy variable: err %v, verdict %q, subs %v; want no verdict", err, pr.verdict, pr.subs)
	}
	_, err = run([]string{"HTTP_PROXY=http://" + held.LocalAddr().String()}, "payload-sent")
	var nc *noCanaryError
	if !errors.As(err, &nc) {
		t.Errorf("a port another socket holds: err %v, want a noCanaryError", err)
	}
}
