package filter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

// verdict is what a filter decided for one call, in kernel terms.
type verdict struct {
	kind  string // "allow", "errno", "kill"
	errno string // for kind "errno": the x/sys name
}

func (v verdict) String() string {
	if v.kind == "errno" {
		return "errno " + v.errno
	}
	return v.kind
}

var (
	allowV = verdict{kind: "allow"}
	killV  = verdict{kind: "kill"}
)

func errnoV(name string) verdict { return verdict{kind: "errno", errno: name} }

// seccompData returns struct seccomp_data laid out for x/net/bpf's VM.
//
// The kernel hands a seccomp filter seccomp_data in host byte order
// (little-endian on x86_64 and aarch64), and its BPF loads read host-endian
// words. x/net/bpf's VM loads words big-endian (bpf/vm_instructions.go). So
// that the VM reads at each offset the word the kernel would read there,
// every 32-bit field is stored here big-endian: nr at 0, arch at 4, and for
// each 64-bit argument its low half at 16+8i and its high half at 20+8i,
// which is where a little-endian u64 keeps them. A filter that read the high
// half instead of the low one fails the upper-bit rows below, as it would
// on the kernel.
func seccompData(auditArch, nr uint32, args [6]uint64) []byte {
	b := make([]byte, seccompDataSize)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[offArgs+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[offArgs+8*i+4:], uint32(a>>32))
	}
	return b
}

// vmFor loads p into x/net/bpf's VM.
func vmFor(t testing.TB, p *Program) *bpf.VM {
	t.Helper()
	insns := make([]bpf.Instruction, len(p.insns))
	for i, r := range p.insns {
		insns[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	return vm
}

// decode turns a SECCOMP_RET_* value into a verdict; ok is false for any
// action a Program must never return.
func decode(ai archInfo, ret int) (verdict, bool) {
	v := uint32(ret)
	switch {
	case v == _SECCOMP_RET_ALLOW:
		return allowV, true
	case v == _SECCOMP_RET_KILL_PROCESS:
		return killV, true
	case v&^_SECCOMP_RET_DATA == _SECCOMP_RET_ERRNO:
		for _, c := range ai.consts {
			if strings.HasPrefix(c.name, "E") && c.v == v&_SECCOMP_RET_DATA {
				return errnoV(c.name), true
			}
		}
	}
	return verdict{kind: fmt.Sprintf("unexpected %#x", v)}, false
}

func run(t testing.TB, vm *bpf.VM, ai archInfo, data []byte) verdict {
	t.Helper()
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatalf("vm: %v", err)
	}
	v, ok := decode(ai, ret)
	if !ok {
		t.Fatalf("filter returned %v", v)
	}
	return v
}

// vmCase is one call and the verdict the filter must reach.
type vmCase struct {
	name      string
	arch      Arch
	opts      Options
	auditArch uint32 // 0: the arch's own
	sys       string // syscall name, looked up in the arch's table
	nr        uint32 // used when sys is ""
	args      [6]uint64
	want      verdict
}

func c(ai archInfo, name string) uint64 {
	v, ok := ai.consts.lookup(name)
	if !ok {
		panic("no constant " + name)
	}
	return uint64(v)
}

func num(s string) uint64 {
	var v uint64
	if _, err := fmt.Sscan(s, &v); err != nil {
		panic(err)
	}
	return v
}

// argCases are the hand-written rows: every argument rule matched and not
// matched, the arch gate, and ordinary calls. TestVMCoversRules checks that
// every argument rule has both kinds of row here.
func argCases() []vmCase {
	var cases []vmCase
	for _, arch := range []Arch{ArchX86_64, ArchAArch64} {
		ai := archInfos[arch]
		k := func(name string) uint64 { return c(ai, name) }
		a := func(name string, opts Options, sys string, args [6]uint64, want verdict) {
			cases = append(cases, vmCase{name: name, arch: arch, opts: opts, sys: sys, args: args, want: want})
		}
		strict := Options{}
		const sigchld = 17
		const bit32 = uint64(1) << 32
		// Arch gate.
		foreign := []struct {
			name string
			aa   uint32
		}{{"i386", _AUDIT_ARCH_I386}, {"arm", _AUDIT_ARCH_ARM}, {"other64", _AUDIT_ARCH_AARCH64 ^ _AUDIT_ARCH_X86_64 ^ ai.auditArch}, {"zero", 0xffffffff}}
		for _, f := range foreign {
			// getpid's number: allowed natively, killed from another ABI.
			cases = append(cases, vmCase{name: "foreign arch " + f.name, arch: arch, auditArch: f.aa, sys: "getpid", want: killV})
		}
		// x32: the x32 bit kills on x86_64; on aarch64 the number matches no
		// rule and the kernel answers ENOSYS.
		getpid := ai.sysnum.get("getpid")
		x32 := killV
		if arch == ArchAArch64 {
			x32 = allowV
		}
		cases = append(cases,
			vmCase{name: "x32 getpid", arch: arch, nr: x32SyscallBit | getpid, want: x32},
			vmCase{name: "x32 ptrace", arch: arch, nr: x32SyscallBit | ai.sysnum.get("ptrace"), want: x32},
			vmCase{name: "nr -1 (tracer skip)", arch: arch, nr: 0xffffffff, want: allowV},
			vmCase{name: "nr 0x80000000", arch: arch, nr: 0x80000000, want: allowV},
			vmCase{name: "nr 999 unknown", arch: arch, nr: 999, want: allowV},
		)
		// Ordinary calls.
		for _, s := range []string{"read", "write", "openat", "close", "execve", "getpid", "mmap", "futex", "wait4", "exit_group"} {
			a("plain "+s, strict, s, [6]uint64{}, allowV)
		}
		// ptrace and --ptrace.
		a("ptrace strict", strict, "ptrace", [6]uint64{}, errnoV("EPERM"))
		a("ptrace allowed", Options{AllowPtrace: true}, "ptrace", [6]uint64{}, allowV)
		for _, s := range []string{"process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "unshare"} {
			a(s+" with AllowPtrace", Options{AllowPtrace: true}, s, [6]uint64{}, errnoV("EPERM"))
		}
		// clone: arg 0 on both architectures.
		a("clone fork", strict, "clone", [6]uint64{sigchld}, allowV)
		a("clone thread", strict, "clone", [6]uint64{0x3d0f00}, allowV) // CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
		a("clone NEW* in arg 1 only", strict, "clone", [6]uint64{sigchld, k("CLONE_NEWUSER")}, allowV)
		a("clone bit 32 only", strict, "clone", [6]uint64{bit32 | sigchld}, allowV)
		for _, f := range []string{"CLONE_NEWNS", "CLONE_NEWCGROUP", "CLONE_NEWUTS", "CLONE_NEWIPC", "CLONE_NEWUSER", "CLONE_NEWPID", "CLONE_NEWNET", "CLONE_NEWTIME"} {
			a("clone "+f, strict, "clone", [6]uint64{k(f) | sigchld}, errnoV("EPERM"))
			a("clone bit32|"+f, strict, "clone", [6]uint64{bit32 | k(f)}, errnoV("EPERM"))
		}
		a("clone3", strict, "clone3", [6]uint64{}, errnoV("ENOSYS"))
		a("unshare 0", strict, "unshare", [6]uint64{0}, errnoV("EPERM"))
		a("unshare NEWUSER", strict, "unshare", [6]uint64{k("CLONE_NEWUSER")}, errnoV("EPERM"))
		a("setns", strict, "setns", [6]uint64{3, 0}, errnoV("EPERM"))
		// ioctl: request is arg 1, low 32 bits.
		a("ioctl TIOCSTI", strict, "ioctl", [6]uint64{0, k("TIOCSTI")}, errnoV("EPERM"))
		a("ioctl TIOCLINUX", strict, "ioctl", [6]uint64{0, k("TIOCLINUX")}, errnoV("EPERM"))
		a("ioctl bit32|TIOCSTI", strict, "ioctl", [6]uint64{0, bit32 | k("TIOCSTI")}, errnoV("EPERM"))
		a("ioctl high|TIOCLINUX", strict, "ioctl", [6]uint64{0, 0xffffffff00000000 | k("TIOCLINUX")}, errnoV("EPERM"))
		a("ioctl TCGETS", strict, "ioctl", [6]uint64{0, k("TCGETS")}, allowV)
		a("ioctl fd=TIOCSTI req=TCGETS", strict, "ioctl", [6]uint64{k("TIOCSTI"), k("TCGETS")}, allowV)
		a("ioctl TIOCSTI in arg 2", strict, "ioctl", [6]uint64{0, k("TCGETS"), k("TIOCSTI")}, allowV)
		// socket: family is arg 0, low 32 bits.
		for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"} {
			a("socket "+f, strict, "socket", [6]uint64{k(f), 1, 0}, allowV)
			a("socket bit32|"+f, strict, "socket", [6]uint64{bit32 | k(f), 1, 0}, allowV)
		}
		for _, f := range []string{"AF_PACKET", "AF_VSOCK", "AF_ALG", "AF_KEY", "AF_BLUETOOTH"} {
			a("socket "+f, strict, "socket", [6]uint64{k(f), 3, 0}, errnoV("EAFNOSUPPORT"))
		}
		a("socket bit32|AF_PACKET", strict, "socket", [6]uint64{bit32 | k("AF_PACKET"), 3, 0}, errnoV("EAFNOSUPPORT"))
		a("socket AF_PACKET with AF_INET in arg 1", strict, "socket", [6]uint64{k("AF_PACKET"), k("AF_INET"), 0}, errnoV("EAFNOSUPPORT"))
		a("socket family 0xffffffff", strict, "socket", [6]uint64{0xffffffff, 1, 0}, errnoV("EAFNOSUPPORT"))
		a("socketpair untouched", strict, "socketpair", [6]uint64{k("AF_PACKET")}, allowV)
		// On the host's network (landlock) only TCP over IPv4 and IPv6.
		host := Options{HostNamespaces: true}
		const nonblockCloexec = 0x80800
		for _, f := range []string{"AF_INET", "AF_INET6"} {
			a("host socket "+f+" stream", host, "socket", [6]uint64{k(f), 1, 0}, allowV)
			a("host socket "+f+" stream TCP", host, "socket", [6]uint64{k(f), 1, 6}, allowV)
			a("host socket "+f+" stream nonblock|cloexec", host, "socket", [6]uint64{k(f), 1 | nonblockCloexec, 0}, allowV)
			a("host socket bit32|"+f, host, "socket", [6]uint64{bit32 | k(f), bit32 | 1, bit32}, allowV)
			for _, typ := range []uint64{2, 3, 4, 5, 6, 10} {
				a(fmt.Sprintf("host socket %s type %d", f, typ), host, "socket", [6]uint64{k(f), typ | nonblockCloexec, 0}, errnoV("EPERM"))
			}
			a("host socket "+f+" MPTCP", host, "socket", [6]uint64{k(f), 1, 262}, errnoV("EPROTONOSUPPORT"))
			a("host socket "+f+" SCTP", host, "socket", [6]uint64{k(f), 1, 132}, errnoV("EPROTONOSUPPORT"))
		}
		for _, f := range []string{"AF_UNIX", "AF_NETLINK", "AF_PACKET", "AF_VSOCK"} {
			a("host socket "+f, host, "socket", [6]uint64{k(f), 1, 0}, errnoV("EAFNOSUPPORT"))
		}
		a("host socketpair AF_UNIX untouched", host, "socketpair", [6]uint64{k("AF_UNIX"), 1, 0}, allowV)
		a("host ptrace still denied", host, "ptrace", [6]uint64{}, errnoV("EPERM"))
		a("host shmget", host, "shmget", [6]uint64{}, errnoV("EPERM"))
		a("shmget allowed in bwrap", strict, "shmget", [6]uint64{}, allowV)
		nonet := Options{HostNamespaces: true, NoSockets: true}
		for _, f := range []string{"AF_INET", "AF_INET6", "AF_UNIX"} {
			a("no-net socket "+f, nonet, "socket", [6]uint64{k(f), 1, 0}, errnoV("EAFNOSUPPORT"))
		}
		a("no-net socketpair untouched", nonet, "socketpair", [6]uint64{k("AF_UNIX"), 1, 0}, allowV)
		// personality: arg 0, low 32 bits.
		a("personality PER_LINUX", strict, "personality", [6]uint64{0}, allowV)
		a("personality ADDR_NO_RANDOMIZE", strict, "personality", [6]uint64{num(addrNoRandomize)}, allowV)
		a("personality query", strict, "personality", [6]uint64{0xffffffff}, allowV)
		a("personality query 64-bit", strict, "personality", [6]uint64{0xffffffffffffffff}, allowV)
		a("personality bit32|PER_LINUX", strict, "personality", [6]uint64{bit32}, allowV)
		a("personality READ_IMPLIES_EXEC", strict, "personality", [6]uint64{0x0400000}, errnoV("EPERM"))
		a("personality MMAP_PAGE_ZERO", strict, "personality", [6]uint64{0x0100000}, errnoV("EPERM"))
		a("personality PER_LINUX32", strict, "personality", [6]uint64{0x0008}, errnoV("EPERM"))
		a("personality ADDR_NO_RANDOMIZE|READ_IMPLIES_EXEC", strict, "personality", [6]uint64{0x0440000}, errnoV("EPERM"))
		a("personality bit32|READ_IMPLIES_EXEC", strict, "personality", [6]uint64{bit32 | 0x0400000}, errnoV("EPERM"))
		cases = append(cases, setIDCases(arch)...)
	}
	return cases
}

// setIDCases are the set-ID rules' rows on arch: each mode argument with
// S_ISUID, with S_ISGID, and a plain mode, under NoSetID; and the same
// set-ID mode allowed without it (the control).
func setIDCases(arch Arch) []vmCase {
	var cases []vmCase
	noSetID := Options{NoSetID: true}
	for _, r := range Rules() {
		if !r.SetID || r.Cond != AnyBitSet || !r.appliesTo(arch) {
			continue
		}
		with := func(mode uint64) [6]uint64 {
			var args [6]uint64
			args[r.Arg] = mode
			return args
		}
		cases = append(cases,
			vmCase{name: r.Syscall + " 04755", arch: arch, opts: noSetID, sys: r.Syscall, args: with(0o4755), want: errnoV("EPERM")},
			vmCase{name: r.Syscall + " 02755", arch: arch, opts: noSetID, sys: r.Syscall, args: with(0o2755), want: errnoV("EPERM")},
			vmCase{name: r.Syscall + " bit32|04755", arch: arch, opts: noSetID, sys: r.Syscall, args: with(1<<32 | 0o4755), want: errnoV("EPERM")},
			vmCase{name: r.Syscall + " 01777", arch: arch, opts: noSetID, sys: r.Syscall, args: with(0o1777), want: allowV},
			vmCase{name: r.Syscall + " 04755 without NoSetID", arch: arch, opts: Options{}, sys: r.Syscall, args: with(0o4755), want: allowV},
		)
	}
	return cases
}

// optsFor returns the options whose program holds the rules of scope s.
func optsFor(s NetScope) Options {
	switch s {
	case HostNet, HostNetTCP:
		return Options{HostNamespaces: true}
	case HostNoNet:
		return Options{HostNamespaces: true, NoSockets: true}
	}
	return Options{}
}

// ruleCases derives one row per whole-call rule and architecture, with
// arguments that must not matter.
func ruleCases() []vmCase {
	var cases []vmCase
	for _, arch := range []Arch{ArchX86_64, ArchAArch64} {
		for _, r := range Rules() {
			if r.Cond != Always || !r.appliesTo(arch) {
				continue
			}
			opts := optsFor(r.Net)
			opts.NoSetID = r.SetID
			cases = append(cases, vmCase{name: "rule " + r.Syscall + " " + r.Net.String(), arch: arch, sys: r.Syscall,
				opts: opts, args: [6]uint64{0xffffffffffffffff, 1, 2, 3, 4, 5}, want: errnoV(r.Errno)})
		}
	}
	return cases
}

func TestVM(t *testing.T) {
	programs := make(map[[2]any]*bpf.VM)
	for _, tc := range append(argCases(), ruleCases()...) {
		t.Run(tc.arch.String()+"/"+tc.name, func(t *testing.T) {
			key := [2]any{tc.arch, tc.opts}
			vm, ok := programs[key]
			if !ok {
				p, err := Assemble(tc.arch, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				vm = vmFor(t, p)
				programs[key] = vm
			}
			ai := archInfos[tc.arch]
			nr := tc.nr
			if tc.sys != "" {
				n, ok := ai.sysnum.lookup(tc.sys)
				if !ok {
					t.Fatalf("%s has no %s", tc.arch, tc.sys)
				}
				nr = n
			}
			aa := tc.auditArch
			if aa == 0 {
				aa = ai.auditArch
			}
			if got := run(t, vm, ai, seccompData(aa, nr, tc.args)); got != tc.want {
				t.Errorf("nr %d args %#x: got %v, want %v", nr, tc.args, got, tc.want)
			}
		})
	}
}

// TestVMCoversRules fails when an argument rule lacks a row that matches it
// or a row that does not, so a new rule cannot go untested.
func TestVMCoversRules(t *testing.T) {
	for _, arch := range []Arch{ArchX86_64, ArchAArch64} {
		for _, r := range Rules() {
			if r.Cond == Always || !r.appliesTo(arch) {
				continue
			}
			var hit, miss bool
			opts := optsFor(r.Net)
			opts.NoSetID = r.SetID
			for _, tc := range argCases() {
				if tc.arch != arch || tc.sys != r.Syscall || tc.opts != opts {
					continue
				}
				if tc.want == errnoV(r.Errno) {
					hit = true
				} else {
					miss = true
				}
			}
			if !hit || !miss {
				t.Errorf("%s/%s: matching row %v, non-matching row %v; want both", arch, r.Syscall, hit, miss)
			}
		}
	}
}

// TestArchAbsentCalls: the x86-only rules are absent on aarch64, because
// aarch64 has no such calls, and the rest of the table exists on both.
func TestArchAbsentCalls(t *testing.T) {
	for _, s := range []string{"iopl", "ioperm", "modify_ldt", "uselib", "_sysctl", "sysfs"} {
		if _, ok := sysnumAArch64.lookup(s); ok {
			t.Errorf("aarch64 table has %s", s)
		}
		if _, ok := sysnumX86_64.lookup(s); !ok {
			t.Errorf("x86_64 table lacks %s", s)
		}
	}
	for _, r := range Rules() {
		for _, arch := range []Arch{ArchX86_64, ArchAArch64} {
			_, has := archInfos[arch].sysnum.lookup(r.Syscall)
			if r.appliesTo(arch) && !has {
				t.Errorf("rule %s applies to %s, which lacks it", r.Syscall, arch)
			}
		}
	}
}

func TestAssemble(t *testing.T) {
	for _, tc := range []struct {
		arch    Arch
		opts    Options
		wantErr error
	}{
		{ArchX86_64, Options{}, nil},
		{ArchX86_64, Options{AllowPtrace: true}, nil},
		{ArchAArch64, Options{}, nil},
		{ArchAArch64, Options{AllowPtrace: true}, nil},
		{0, Options{}, ErrUnsupportedArch},
		{Arch(99), Options{}, ErrUnsupportedArch},
		{Arch(3), Options{}, ErrUnsupportedArch}, // just past the last
		{Arch(-1), Options{}, ErrUnsupportedArch},
	} {
		t.Run(fmt.Sprintf("%v/%+v", tc.arch, tc.opts), func(t *testing.T) {
			p, err := Assemble(tc.arch, tc.opts)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			b := p.Bytes()
			if len(b) != 8*p.Len() {
				t.Errorf("Bytes is %d bytes for %d instructions", len(b), p.Len())
			}
			if err := validate(p.insns); err != nil {
				t.Error(err)
			}
			// Bytes is struct sock_filter, little-endian, field by field.
			for i, r := range p.insns {
				w := b[8*i:]
				if binary.LittleEndian.Uint16(w) != r.Op || w[2] != r.Jt || w[3] != r.Jf || binary.LittleEndian.Uint32(w[4:]) != r.K {
					t.Fatalf("instruction %d: bytes % x, want %+v", i, w[:8], r)
				}
			}
			b[0] ^= 0xff
			if bytes.Equal(b, p.Bytes()) {
				t.Error("Bytes returned the program's own slice")
			}
			if !strings.HasPrefix(p.Digest(), "sha256:") || len(p.Digest()) != len("sha256:")+64 {
				t.Errorf("Digest = %q", p.Digest())
			}
		})
	}
	strict, _ := Assemble(ArchX86_64, Options{})
	loose, _ := Assemble(ArchX86_64, Options{AllowPtrace: true})
	arm, _ := Assemble(ArchAArch64, Options{})
	if strict.Digest() == loose.Digest() || strict.Digest() == arm.Digest() {
		t.Error("different programs share a digest")
	}
	again, _ := Assemble(ArchX86_64, Options{})
	if again.Digest() != strict.Digest() {
		t.Error("Assemble is not deterministic")
	}
}

func TestRulesIsACopy(t *testing.T) {
	r := Rules()
	r[0].Syscall = "changed"
	for i := range r {
		if r[i].Values != nil {
			r[i].Values[0] = "changed"
		}
		if r[i].Arches != nil {
			r[i].Arches[0] = 0
		}
	}
	for _, x := range Rules() {
		if x.Syscall == "changed" || (x.Values != nil && x.Values[0] == "changed") || (x.Arches != nil && x.Arches[0] == 0) {
			t.Fatal("changing Rules' result changed the table")
		}
	}
}

// TestGolden pins the disassembly of every program; -update rewrites it.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		arch Arch
		opts Options
		file string
	}{
		{ArchX86_64, Options{}, "x86_64.golden"},
		{ArchX86_64, Options{AllowPtrace: true}, "x86_64_ptrace.golden"},
		{ArchAArch64, Options{}, "aarch64.golden"},
		{ArchAArch64, Options{AllowPtrace: true}, "aarch64_ptrace.golden"},
		{ArchX86_64, Options{NoSetID: true}, "x86_64_nosetid.golden"},
		{ArchAArch64, Options{NoSetID: true}, "aarch64_nosetid.golden"},
		{ArchX86_64, Options{HostNamespaces: true}, "x86_64_landlock.golden"},
		{ArchAArch64, Options{HostNamespaces: true}, "aarch64_landlock.golden"},
		{ArchX86_64, Options{HostNamespaces: true, NoSockets: true}, "x86_64_landlock_nonet.golden"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p, err := Assemble(tc.arch, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			fmt.Fprintf(&got, "# %s %+v: %d instructions, %s\n", tc.arch, tc.opts, p.Len(), p.Digest())
			for i, r := range p.insns {
				fmt.Fprintf(&got, "%3d: %v\n", i, r.Disassemble())
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got.String() != string(want) {
				t.Errorf("%s differs (go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got.String(), want)
			}
		})
	}
}

func TestArchString(t *testing.T) {
	for _, tc := range []struct {
		a    Arch
		want string
	}{{ArchX86_64, "x86_64"}, {ArchAArch64, "aarch64"}, {0, "Arch(0)"}, {3, "Arch(3)"}, {7, "Arch(7)"}, {-1, "Arch(-1)"}} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%d: %q, want %q", int(tc.a), got, tc.want)
		}
	}
}

func TestArchFor(t *testing.T) {
	for _, tc := range []struct {
		goos, goarch string
		want         Arch
		wantErr      error
	}{
		{"linux", "amd64", ArchX86_64, nil},
		{"linux", "arm64", ArchAArch64, nil},
		{"linux", "386", 0, ErrUnsupportedArch},
		{"linux", "riscv64", 0, ErrUnsupportedArch},
		{"linux", "ppc64le", 0, ErrUnsupportedArch},
		{"darwin", "arm64", 0, ErrUnsupportedArch},
		{"windows", "amd64", 0, ErrUnsupportedArch},
	} {
		got, err := archFor(tc.goos, tc.goarch)
		if got != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s/%s: %v, %v; want %v, %v", tc.goos, tc.goarch, got, err, tc.want, tc.wantErr)
		}
		if err != nil && err == ErrUnsupportedArch {
			t.Errorf("%s/%s: bare sentinel, want context", tc.goos, tc.goarch)
		}
	}
}

func BenchmarkAssemble(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Assemble(ArchX86_64, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzVM runs arbitrary seccomp_data through both programs: the VM never
// fails, the verdict is always allow, a known errno or kill, a foreign arch
// always kills, and a number with no rule is always allowed.
func FuzzVM(f *testing.F) {
	f.Add(uint32(_AUDIT_ARCH_X86_64), uint32(101), uint64(0), uint64(0x100005412))
	f.Add(uint32(_AUDIT_ARCH_AARCH64), uint32(29), uint64(0), uint64(0x5412))
	f.Add(uint32(_AUDIT_ARCH_I386), uint32(20), uint64(0), uint64(0))
	f.Add(uint32(_AUDIT_ARCH_X86_64), uint32(0x40000027), uint64(0), uint64(0))
	type prog struct {
		ai archInfo
		vm *bpf.VM
		nr map[uint32]bool // numbers with a rule
	}
	var progs []prog
	for _, arch := range []Arch{ArchX86_64, ArchAArch64} {
		p, err := Assemble(arch, Options{})
		if err != nil {
			f.Fatal(err)
		}
		ai := archInfos[arch]
		nrs := make(map[uint32]bool)
		for _, r := range Rules() {
			if r.appliesTo(arch) {
				nrs[ai.sysnum.get(r.Syscall)] = true
			}
		}
		progs = append(progs, prog{ai, vmFor(f, p), nrs})
	}
	f.Fuzz(func(t *testing.T, auditArch, nr uint32, a0, a1 uint64) {
		for _, p := range progs {
			got := run(t, p.vm, p.ai, seccompData(auditArch, nr, [6]uint64{a0, a1, a0 ^ a1, 0, 0, 0}))
			switch {
			case auditArch != p.ai.auditArch:
				if got != killV {
					t.Fatalf("%s: foreign arch %#x: %v", p.ai.name, auditArch, got)
				}
			case p.ai.killX32 && nr&x32SyscallBit != 0 && nr != 0xffffffff:
				if got != killV {
					t.Fatalf("%s: x32 nr %#x: %v", p.ai.name, nr, got)
				}
			case !p.nr[nr]:
				if got != allowV {
					t.Fatalf("%s: nr %d has no rule, got %v", p.ai.name, nr, got)
				}
			case got == killV:
				t.Fatalf("%s: nr %d killed; rules never kill", p.ai.name, nr)
			}
		}
	})
}

// get is lookup as a map index reads: 0 for a name t lacks.
func (t numbers) get(name string) uint32 {
	v, _ := t.lookup(name)
	return v
}
