// Package terminal gives a sandboxed command a pseudo-terminal of its own,
// relayed to the caller's: a command never holds the caller's terminal,
// so it cannot push input into it (TIOCSTI) or change its settings. Linux
// only; elsewhere Open refuses.
package terminal
