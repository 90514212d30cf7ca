package filter

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

// pad emits n loads of seccomp_data.nr, which change nothing.
func pad(b *builder, n int) {
	for range n {
		b.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
	}
}

func TestAssembleJumps(t *testing.T) {
	ret := func(v uint32) bpf.Instruction { return bpf.RetConstant{Val: v} }
	for _, tc := range []struct {
		name    string
		build   func(b *builder)
		wantErr error
		want    uint32 // the value the VM returns, when wantErr is nil
	}{
		{"jump 255 fits", func(b *builder) {
			b.jumpIf(bpf.JumpEqual, 0, "far", "")
			pad(b, 254)
			b.emit(ret(1))
			b.mark("far")
			b.emit(ret(2))
		}, nil, 2},
		{"jump 256 refused", func(b *builder) {
			b.jumpIf(bpf.JumpEqual, 0, "far", "")
			pad(b, 255)
			b.emit(ret(1))
			b.mark("far")
			b.emit(ret(2))
		}, ErrJumpTooFar, 0},
		{"false branch 256 refused", func(b *builder) {
			b.jumpIf(bpf.JumpEqual, 1, "", "far")
			pad(b, 255)
			b.emit(ret(1))
			b.mark("far")
			b.emit(ret(2))
		}, ErrJumpTooFar, 0},
		{"long jump over 300", func(b *builder) {
			b.jumpIf(bpf.JumpEqual, 0, "", "out")
			b.jumpAlways("far")
			b.mark("out")
			b.emit(ret(1))
			pad(b, 300)
			b.emit(ret(3))
			b.mark("far")
			b.emit(ret(2))
		}, nil, 2},
		{"backward jump", func(b *builder) {
			b.mark("top")
			b.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
			b.jumpIf(bpf.JumpEqual, 0, "top", "")
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"unknown label", func(b *builder) {
			b.jumpIf(bpf.JumpEqual, 0, "nowhere", "")
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"duplicate label", func(b *builder) {
			b.mark("x")
			b.mark("x")
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"no return at end", func(b *builder) {
			b.emit(ret(1))
			b.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
		}, ErrInvalidProgram, 0},
		{"2-byte load", func(b *builder) {
			b.emit(bpf.LoadAbsolute{Off: offNr, Size: 2})
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"misaligned load", func(b *builder) {
			b.emit(bpf.LoadAbsolute{Off: 2, Size: 4})
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"load past seccomp_data", func(b *builder) {
			b.emit(bpf.LoadAbsolute{Off: 64, Size: 4})
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"last word of seccomp_data", func(b *builder) {
			b.emit(bpf.LoadAbsolute{Off: 60, Size: 4})
			b.emit(ret(7))
		}, nil, 7},
		{"indirect load", func(b *builder) {
			b.emit(bpf.LoadIndirect{Off: 0, Size: 4})
			b.emit(ret(1))
		}, ErrInvalidProgram, 0},
		{"return A", func(b *builder) {
			b.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
			b.emit(bpf.RetA{})
		}, ErrInvalidProgram, 0},
		{"4096 instructions", func(b *builder) {
			pad(b, 4095)
			b.emit(ret(5))
		}, nil, 5},
		{"4097 instructions", func(b *builder) {
			pad(b, 4096)
			b.emit(ret(5))
		}, ErrInvalidProgram, 0},
		{"empty", func(b *builder) {}, ErrInvalidProgram, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			tc.build(&b)
			raw, err := b.assemble()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if err == tc.wantErr || !strings.HasPrefix(err.Error(), "filter: ") {
					t.Errorf("error %q lacks context", err)
				}
				return
			}
			insns := make([]bpf.Instruction, len(raw))
			for i, r := range raw {
				insns[i] = r.Disassemble()
			}
			vm, err := bpf.NewVM(insns)
			if err != nil {
				t.Fatal(err)
			}
			got, err := vm.Run(make([]byte, seccompDataSize))
			if err != nil || uint32(got) != tc.want {
				t.Errorf("VM returned %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestValidateRaw feeds validate encodings the builder cannot produce.
func TestValidateRaw(t *testing.T) {
	ret := bpf.RawInstruction{Op: 0x06} // what bpf.RetConstant{} assembles to
	if r, _ := (bpf.RetConstant{}).Assemble(); r != ret {
		t.Fatalf("RetConstant assembles to %+v", r)
	}
	ja, _ := bpf.Jump{Skip: 5}.Assemble()
	jeq, _ := bpf.JumpIf{Cond: bpf.JumpEqual, Val: 1, SkipTrue: 9}.Assemble()
	for _, tc := range []struct {
		name string
		prog []bpf.RawInstruction
	}{
		{"ja past end", []bpf.RawInstruction{ja, ret}},
		{"jeq past end", []bpf.RawInstruction{jeq, ret}},
		{"unknown opcode", []bpf.RawInstruction{{Op: 0xff}, ret}},
	} {
		if err := validate(tc.prog); !errors.Is(err, ErrInvalidProgram) {
			t.Errorf("%s: %v, want ErrInvalidProgram", tc.name, err)
		}
	}
}

// TestBugMarked: errors from the table or assembler say BUG; the user's
// error (an unsupported arch) does not.
func TestBugMarked(t *testing.T) {
	_, err := Assemble(Arch(42), Options{})
	if err == nil || strings.Contains(err.Error(), "BUG") {
		t.Errorf("unsupported arch: %v", err)
	}
	ai := archInfos[ArchX86_64]
	for _, tc := range []struct {
		name string
		r    Rule
	}{
		{"unknown syscall", Rule{Syscall: "no_such_call", Cond: Always, Errno: "EPERM"}},
		{"unknown errno", Rule{Syscall: "ptrace", Cond: Always, Errno: "EWHAT"}},
		{"not an errno", Rule{Syscall: "ptrace", Cond: Always, Errno: "TIOCSTI"}},
		{"unknown value", Rule{Syscall: "ioctl", Cond: OneOf, Arg: 1, Values: []string{"TIOCWHAT"}, Errno: "EPERM"}},
		{"no values", Rule{Syscall: "ioctl", Cond: OneOf, Arg: 1, Errno: "EPERM"}},
		{"arg 6", Rule{Syscall: "ioctl", Cond: OneOf, Arg: 6, Values: []string{"TIOCSTI"}, Errno: "EPERM"}},
		{"no cond", Rule{Syscall: "ioctl", Arg: 1, Values: []string{"TIOCSTI"}, Errno: "EPERM"}},
	} {
		_, err := build(ai, ArchX86_64, []Rule{tc.r}, Options{})
		if !errors.Is(err, ErrInvalidProgram) {
			t.Errorf("%s: %v, want ErrInvalidProgram", tc.name, err)
		}
	}
	_, err = build(ai, ArchX86_64, []Rule{{Syscall: "mount", Cond: Always, Errno: "EPERM"}, {Syscall: "mount", Cond: Always, Errno: "EPERM"}}, Options{})
	if !errors.Is(err, ErrInvalidProgram) {
		t.Errorf("duplicate rule: %v", err)
	}
	if err := bug(ErrJumpTooFar); !strings.HasPrefix(err.Error(), "BUG(sandbox-run): ") || !errors.Is(err, ErrJumpTooFar) {
		t.Errorf("bug() = %v", err)
	}
}
