package filter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// Options widens the filter for one run. The zero value is the strictest
// filter, and the one to use unless the user asked for more.
type Options struct {
	// AllowPtrace removes the ptrace rule, and only that rule:
	// process_vm_readv, process_vm_writev, kcmp and pidfd_getfd stay
	// denied. Set it only after CheckPtrace has returned nil; the filter
	// cannot check Yama itself.
	AllowPtrace bool
	// HostNamespaces builds the program for a command that shares the
	// host's namespaces (--sandbox landlock): the socket rule for a
	// sandbox with its own network namespace gives way to stricter ones
	// that leave only TCP over IPv4 and IPv6 (the only sockets Landlock's
	// port rules confine; socketpair stays allowed), and the host's System
	// V and POSIX message-queue IPC is refused.
	HostNamespaces bool
	// NoSockets, with HostNamespaces, refuses socket() outright: the run
	// has no network at all. socketpair stays allowed.
	NoSockets bool
	// NoSetID adds the set-ID rules: no call may set S_ISUID or S_ISGID
	// on a file, and openat2 is refused. sandbox-run sets it when the
	// command's files land on the host as another uid's (--map-owner).
	NoSetID bool
}

// Program is a validated seccomp filter for one architecture. It can only
// be made by Assemble, so every Program has at most BPF_MAXINSNS
// instructions, ends in a return, jumps only forward and inside itself,
// and loads only aligned 4-byte words of seccomp_data. A Program is
// immutable and safe for concurrent use.
type Program struct {
	arch   Arch
	insns  []bpf.RawInstruction
	bytes  []byte
	digest string
}

// Bytes returns the program as an array of struct sock_filter
// (u16 code, u8 jt, u8 jf, u32 k) in the byte order of the program's
// architecture: what bwrap --seccomp FD and SECCOMP_SET_MODE_FILTER read.
// The slice is a copy.
func (p *Program) Bytes() []byte { return append([]byte(nil), p.bytes...) }

// Digest returns "sha256:" and the hex SHA-256 of Bytes, the name the
// isolation report gives the installed filter.
func (p *Program) Digest() string { return p.digest }

// Arch returns the architecture the program is for.
func (p *Program) Arch() Arch { return p.arch }

// Len returns the number of instructions.
func (p *Program) Len() int { return len(p.insns) }

// Labels of the shared parts of a program.
const (
	lblArchOK = "arch_ok"
	lblNrOK   = "nr_ok"
)

// Assemble compiles Rules for arch, less the rules opts lifts. The program
// works in this order:
//
//  1. seccomp_data.arch is not arch's AUDIT_ARCH: SECCOMP_RET_KILL_PROCESS
//     (a foreign ABI, such as i386 int $0x80 on x86_64);
//  2. on x86_64, the number has the x32 bit (and is not -1, which a
//     tracer uses to skip a call): SECCOMP_RET_KILL_PROCESS;
//  3. the number has a rule: the rule decides (SECCOMP_RET_ERRNO, or allow
//     when its condition does not match);
//  4. anything else: SECCOMP_RET_ALLOW.
//
// Assemble is pure: it reads no system state, so any arch can be built on
// any host. It returns an error wrapping ErrUnsupportedArch for an arch
// without a table; any other error means the rule table or the assembler is
// wrong, is marked BUG(sandbox-run), and wraps ErrInvalidProgram or
// ErrJumpTooFar.
func Assemble(arch Arch, opts Options) (*Program, error) {
	ai, ok := infoOf(arch)
	if !ok {
		return nil, fmt.Errorf("filter: assemble for %v: %w", arch, ErrUnsupportedArch)
	}
	b, err := build(ai, arch, rules, opts)
	if err != nil {
		return nil, bug(err)
	}
	raw, err := b.assemble()
	if err != nil {
		return nil, bug(err)
	}
	return newProgram(arch, ai, raw), nil
}

func newProgram(arch Arch, ai archInfo, raw []bpf.RawInstruction) *Program {
	b := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		b = ai.order.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = ai.order.AppendUint32(b, r.K)
	}
	sum := sha256.Sum256(b)
	return &Program{arch: arch, insns: raw, bytes: b, digest: "sha256:" + hex.EncodeToString(sum[:])}
}

// bug marks an error that only a mistake in this package can cause.
func bug(err error) error { return fmt.Errorf("BUG(sandbox-run): %w", err) }

// build lays out the program for ai from rs. Every conditional jump goes
// forward to a nearby label: the arch gate jumps over one return, the
// dispatch chain jumps to a shared errno return right after the chain or to
// a self-contained block for an argument rule. With today's table the
// longest jump is well under 255; a table that outgrows that makes
// assemble fail with ErrJumpTooFar, never a wrong program.
func build(ai archInfo, arch Arch, rs []Rule, opts Options) (*builder, error) {
	var b builder
	b.header(ai)
	blocks, errnos, err := b.dispatch(ai, arch, rs, opts)
	if err != nil {
		return nil, err
	}
	b.emit(bpf.RetConstant{Val: _SECCOMP_RET_ALLOW})
	for _, e := range errnos {
		v, err := ai.errno(e)
		if err != nil {
			return nil, err
		}
		b.mark("ret_" + e)
		b.emit(bpf.RetConstant{Val: _SECCOMP_RET_ERRNO | v})
	}
	for _, bl := range blocks {
		if err := b.emitBlock(ai, bl); err != nil {
			return nil, err
		}
	}
	return &b, nil
}

// header emits the arch gate and loads the syscall number: a foreign
// architecture's call, or (on x86-64) an x32 one, kills the process.
func (b *builder) header(ai archInfo) {
	kill := bpf.RetConstant{Val: _SECCOMP_RET_KILL_PROCESS}
	b.emit(bpf.LoadAbsolute{Off: offArch, Size: 4})
	b.jumpIf(bpf.JumpEqual, ai.auditArch, lblArchOK, "")
	b.emit(kill)
	b.mark(lblArchOK)
	b.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if ai.killX32 {
		// Kill every number with the x32 bit, except -1: a tracer sets the
		// number to -1 to skip a call, and the kernel then runs the filter
		// on it; -1 reaches no syscall (ENOSYS). libseccomp does the same.
		b.jumpIf(bpf.JumpBitsSet, x32SyscallBit, "", lblNrOK)
		b.jumpIf(bpf.JumpEqual, ^uint32(0), lblNrOK, "")
		b.emit(kill)
		b.mark(lblNrOK)
	}
}

// argBlock is the code of one argument rule, laid out after the
// dispatch chain under its label.
type argBlock struct {
	label string
	rule  Rule
	next  string // the chained rule's block for the same syscall, if any
}

// dispatch emits the chain that compares the syscall number with each
// rule that applies: a rule that always denies jumps to its errno's
// shared return, an argument rule to its block. It returns the blocks
// and the shared returns, in order of first use, for build to lay out.
func (b *builder) dispatch(ai archInfo, arch Arch, rs []Rule, opts Options) ([]argBlock, []string, error) {
	var blocks []argBlock
	var errnos []string
	seen := make(map[string]bool)
	last := "" // the syscall of the previous argument rule kept
	for i, r := range rs {
		if !r.appliesTo(arch) || (r.Ptrace && opts.AllowPtrace) || !r.Net.in(opts) || (r.SetID && !opts.NoSetID) {
			continue
		}
		nr, ok := ai.sysnum.lookup(r.Syscall)
		if !ok {
			return nil, nil, fmt.Errorf("filter: rule %d: %s has no syscall %q: %w", i, arch, r.Syscall, ErrInvalidProgram)
		}
		if seen[r.Syscall] {
			// A further argument rule for the same syscall chains onto
			// the one right before it: the call is denied when any
			// rule of the chain matches.
			if r.Cond == Always || last != r.Syscall {
				return nil, nil, fmt.Errorf("filter: rule %d: second rule for %q: %w", i, r.Syscall, ErrInvalidProgram)
			}
			blocks[len(blocks)-1].next = fmt.Sprintf("rule_%s_%d", r.Syscall, i)
			blocks = append(blocks, argBlock{label: blocks[len(blocks)-1].next, rule: r})
			continue
		}
		seen[r.Syscall] = true
		last = ""
		if r.Cond == Always {
			if !contains(errnos, r.Errno) {
				errnos = append(errnos, r.Errno)
			}
			b.jumpIf(bpf.JumpEqual, nr, "ret_"+r.Errno, "")
			continue
		}
		label := "rule_" + r.Syscall
		blocks = append(blocks, argBlock{label: label, rule: r})
		last = r.Syscall
		b.jumpIf(bpf.JumpEqual, nr, label, "")
	}
	return blocks, errnos, nil
}

// emitBlock emits bl: load the rule's argument, deny with its errno when
// the condition holds, and otherwise allow or go on to the next rule of
// its chain.
func (b *builder) emitBlock(ai archInfo, bl argBlock) error {
	r := bl.rule
	errno, err := ai.errno(r.Errno)
	if err != nil {
		return err
	}
	if r.Arg < 0 || r.Arg > 5 {
		return fmt.Errorf("filter: rule %q: argument %d out of 0-5: %w", r.Syscall, r.Arg, ErrInvalidProgram)
	}
	vals, err := ai.values(r.Values)
	if err != nil {
		return fmt.Errorf("filter: rule %q: %w", r.Syscall, err)
	}
	deny := bpf.RetConstant{Val: _SECCOMP_RET_ERRNO | errno}
	yes, no := bl.label+"_match", bl.label+"_nomatch"
	b.mark(bl.label)
	b.emit(bpf.LoadAbsolute{Off: ai.argLow(r.Arg), Size: 4})
	// pass is where a call that this rule does not deny goes: allowed,
	// or on to the next rule of its chain.
	pass := func() {
		if bl.next != "" {
			b.jumpAlways(bl.next)
			return
		}
		b.emit(bpf.RetConstant{Val: _SECCOMP_RET_ALLOW})
	}
	switch r.Cond {
	case AnyBitSet:
		var mask uint32
		for _, v := range vals {
			mask |= v
		}
		b.jumpIf(bpf.JumpBitsSet, mask, yes, "")
		pass()
		b.mark(yes)
		b.emit(deny)
	case OneOf:
		for _, v := range vals {
			b.jumpIf(bpf.JumpEqual, v, yes, "")
		}
		pass()
		b.mark(yes)
		b.emit(deny)
	case NoneOf:
		for _, v := range vals {
			b.jumpIf(bpf.JumpEqual, v, no, "")
		}
		b.emit(deny)
		b.mark(no)
		pass()
	default:
		return fmt.Errorf("filter: rule %q: condition %v: %w", r.Syscall, r.Cond, ErrInvalidProgram)
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// errno returns the number of the errno called name on ai, checked to fit
// SECCOMP_RET_DATA.
func (ai archInfo) errno(name string) (uint32, error) {
	v, ok := ai.consts.lookup(name)
	if !ok || !strings.HasPrefix(name, "E") || v == 0 || v > _SECCOMP_RET_DATA {
		return 0, fmt.Errorf("filter: %s: %q is not an errno this package knows: %w", ai.name, name, ErrInvalidProgram)
	}
	return v, nil
}

// values resolves constant names, or numbers, to their values on ai.
func (ai archInfo) values(names []string) ([]uint32, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("filter: no values: %w", ErrInvalidProgram)
	}
	out := make([]uint32, len(names))
	for i, n := range names {
		if v, ok := ai.consts.lookup(n); ok {
			out[i] = v
			continue
		}
		v, err := strconv.ParseUint(n, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("filter: %s: value %q is neither a known constant nor a 32-bit number: %w", ai.name, n, ErrInvalidProgram)
		}
		out[i] = uint32(v)
	}
	return out, nil
}
