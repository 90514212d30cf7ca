package seatbelt

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// The streams below are constructed (no Mac was available): `log`'s banner
// and error texts as the peers quote them.

const kernelDenial = `{"eventMessage":"Sandbox: cat(7) deny(1) file-read-data /Users/alice/.ssh/id_rsa ` + sampleTag +
	`","processID":0,"senderImagePath":"/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox"}`

func watchStrings(stdout, stderr string) (*Watch, *[]Denial) {
	var got []Denial
	w := WatchStream(strings.NewReader(stdout), strings.NewReader(stderr), sampleTag, func(d Denial) { got = append(got, d) })
	return w, &got
}

func TestWatchStartsAtTheBanner(t *testing.T) {
	b, err := os.ReadFile("testdata/constructed-log-stream.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	w, got := watchStrings(string(b), "")
	started, err := w.WaitStart(5 * time.Second)
	if !started || err != nil {
		t.Fatalf("WaitStart = %v, %v; want started", started, err)
	}
	<-w.Done()
	st, err := w.Stats()
	if err != nil || !st.Banner || st.Denials != len(*got) || st.Denials != 10 || st.Noise != 1 {
		t.Errorf("stats %+v, %v; %d denials passed on", st, err, len(*got))
	}
}

// An error on stderr is a failure, not "denials read back", even though it
// is the stream's first line.
func TestWatchErrorIsAFailure(t *testing.T) {
	for _, tc := range []struct{ name, stdout, stderr, want string }{
		{"not admin", "", "log: Must be admin to run 'stream' command\n", "Must be admin"},
		{"bad predicate", "", "log: Invalid predicate: Unable to parse the format string\n", "Invalid predicate"},
		{"ended without banner", "", "", "without its banner"},
		{"ended with noise only", "something else\n", "", "without its banner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := watchStrings(tc.stdout, tc.stderr)
			started, err := w.WaitStart(5 * time.Second)
			if started || !errors.Is(err, ErrStreamFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WaitStart = %v, %v; want a failure naming %q", started, err, tc.want)
			}
		})
	}
	// Control: the same error text after the banner, once streaming, does
	// not undo the start.
	w, _ := watchStrings("Filtering the log data using \"x\"\n", "")
	if started, err := w.WaitStart(5 * time.Second); !started || err != nil {
		t.Fatalf("control: WaitStart = %v, %v", started, err)
	}
}

// The first stdout line is read as a line like any other: a stream whose
// first line is already a denial (no banner, as when log's output is
// piped differently) loses nothing.
func TestWatchKeepsTheFirstLine(t *testing.T) {
	w, got := watchStrings(kernelDenial+"\n", "")
	<-w.Done()
	if len(*got) != 1 || (*got)[0].PID != 7 {
		t.Fatalf("got %+v, want the first line's denial", *got)
	}
	if st, _ := w.Stats(); st.Banner {
		t.Errorf("a banner was seen in a stream without one")
	}
}

// Nothing yet within the timeout: not started, no error; the stream keeps
// being read, and a banner that comes later still counts.
func TestWatchTimeout(t *testing.T) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	var got []Denial
	w := WatchStream(outR, errR, sampleTag, func(d Denial) { got = append(got, d) })
	if started, err := w.WaitStart(50 * time.Millisecond); started || err != nil {
		t.Fatalf("WaitStart = %v, %v; want a timeout", started, err)
	}
	io.WriteString(outW, "Filtering the log data using \"x\"\n"+kernelDenial+"\n")
	if started, err := w.WaitStart(5 * time.Second); !started || err != nil {
		t.Fatalf("later WaitStart = %v, %v", started, err)
	}
	outW.Close()
	errW.Close()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end after both outputs closed")
	}
	if len(got) != 1 {
		t.Errorf("got %d denials, want 1", len(got))
	}
}

func TestIsNoise(t *testing.T) {
	if !IsNoise(Denial{Operation: "mach-lookup", Target: "com.apple.logd"}) {
		t.Errorf("logd lookup is not noise")
	}
	for _, d := range []Denial{
		{Operation: "mach-lookup", Target: "com.apple.dnssd.service"},
		{Operation: "file-read-data", Target: "com.apple.logd"},
		{Operation: "mach-lookup", Target: "com.apple.logd.evil"},
	} {
		if IsNoise(d) {
			t.Errorf("%+v is counted as noise", d)
		}
	}
}
