package terminal

import (
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"golang.org/x/sys/unix"
)

// Terminal is a run's pseudo-terminal: the command's side and the relay
// between it and the caller's terminal.
type Terminal struct {
	master, slave *os.File
	restore       func()
	stopWinch     func()
	outDone       chan struct{}
}

// Open makes a pseudo-terminal for a run whose caller's terminal is term
// (read from in, written to out): the new terminal gets term's window
// size and follows it on SIGWINCH; term is put in raw mode, so the keys
// that make signals (Ctrl-C, Ctrl-Z, Ctrl-\) travel as bytes to the
// sandbox's terminal, whose line discipline signals the command's
// foreground job there. Close restores term. Its errors are one line:
// what, why and the fix (--no-tty).
func Open(term *os.File, in io.Reader, out io.Writer) (*Terminal, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fault.New("cannot open a pseudo-terminal", fault.Reason(err), "mount devpts (/dev/pts) or run with --no-tty")
	}
	fail := func(what string, err error) (*Terminal, error) {
		master.Close()
		return nil, fault.New(what, fault.Reason(err), "run with --no-tty")
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return fail("cannot unlock the pseudo-terminal", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		return fail("cannot name the pseudo-terminal", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("cannot open the pseudo-terminal's other side", err)
	}
	t := &Terminal{master: master, slave: slave, restore: func() {}, stopWinch: func() {}, outDone: make(chan struct{})}
	copyWinsize(term, master)
	if st, err := unix.IoctlGetTermios(int(term.Fd()), unix.TCGETS); err == nil {
		raw := *st
		// cfmakeraw(3).
		raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		raw.Oflag &^= unix.OPOST
		raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		raw.Cflag &^= unix.CSIZE | unix.PARENB
		raw.Cflag |= unix.CS8
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
		if err := unix.IoctlSetTermios(int(term.Fd()), unix.TCSETS, &raw); err == nil {
			var once sync.Once
			t.restore = func() { once.Do(func() { unix.IoctlSetTermios(int(term.Fd()), unix.TCSETS, st) }) }
		}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, unix.SIGWINCH)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				copyWinsize(term, master)
			case <-stop:
				return
			}
		}
	}()
	t.stopWinch = func() { signal.Stop(winch); close(stop) }
	// Input: the caller's bytes to the terminal. The read of in may stay
	// blocked after the run (a terminal cannot be read with a deadline
	// portably); it ends with the caller's input.
	go io.Copy(master, in)
	go func() {
		io.Copy(out, master) // ends with EIO once every holder of the slave is gone
		close(t.outDone)
	}()
	return t, nil
}

func copyWinsize(from, to *os.File) {
	if ws, err := unix.IoctlGetWinsize(int(from.Fd()), unix.TIOCGWINSZ); err == nil {
		unix.IoctlSetWinsize(int(to.Fd()), unix.TIOCSWINSZ, ws)
	}
}

// Command is the command's side of the terminal: its stdin, stdout and
// stderr, and its controlling terminal once the sandbox's init makes it
// so.
func (t *Terminal) Command() *os.File { return t.slave }

// Close waits (briefly) for the command's last output, then restores the
// caller's terminal. Call it once, when the sandbox has ended.
func (t *Terminal) Close() {
	t.slave.Close()
	select {
	case <-t.outDone:
	case <-time.After(time.Second):
	}
	t.master.Close()
	t.stopWinch()
	t.restore()
}
