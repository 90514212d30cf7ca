// Package mount is the vocabulary of a sandbox's file system layout,
// shared by the plan and the mechanisms that translate it: an ordered
// list of steps (a bind, read-only or writable, by path or by descriptor;
// a symbolic link; a proc; a dev; a tmpfs with its size; a remount
// read-only; a directory). bwrap turns the steps into its argument stream
// (package bwrap), gVisor into an OCI spec (package gvisor).
//
// A Step is a value: it holds no descriptor and touches nothing. Its
// meaning is the same whatever mechanism applies it; only a mechanism
// that cannot bind by descriptor (gVisor) reads Src where FD is set.
package mount

import "strconv"

// Kind is one operation of the layout.
type Kind int

// The kinds, named after the bwrap options that are their plainest form.
const (
	ROBind    Kind = iota // bind Src at Dst read-only (by descriptor FD when FD >= 0)
	Bind                  // bind Src at Dst writable (by descriptor FD when FD >= 0)
	Symlink               // a symbolic link at Dst whose target is Src
	Proc                  // a proc file system of the sandbox's PID namespace at Dst
	Dev                   // a minimal /dev at Dst
	Tmpfs                 // a tmpfs at Dst, of at most Size bytes when Size > 0
	RemountRO             // make what is mounted at Dst read-only
	Dir                   // a directory at Dst
)

var kindNames = [...]string{"ro-bind", "bind", "symlink", "proc", "dev", "tmpfs", "remount-ro", "dir"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Step is one step of the layout. Order matters: the steps apply in
// turn, so a later one covers an earlier one at the same place.
type Step struct {
	Kind Kind
	Src  string // host path (binds) or link target (Symlink)
	Dst  string // path inside the sandbox
	// FD, when >= 0, is the descriptor number the mechanism sees for a
	// bind made by descriptor; Src then only documents it. -1: by path.
	FD   int
	Size int64 // Tmpfs only: bytes, 0 = unlimited
}
