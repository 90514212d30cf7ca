package filter

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

var (
	// ErrJumpTooFar is wrapped when a conditional jump would need an offset
	// above 255, which classic BPF cannot encode. Assemble reports it instead
	// of emitting a truncated offset.
	ErrJumpTooFar = errors.New("filter: conditional jump too far")

	// ErrInvalidProgram is wrapped when a program breaks a rule the kernel
	// or this package imposes: more than BPF_MAXINSNS instructions, no final
	// return, a load that is not 4 aligned bytes inside seccomp_data, an
	// instruction other than a load, jump or constant return, a jump out of
	// the program, a backward jump, or an unknown label.
	ErrInvalidProgram = errors.New("filter: invalid program")
)

// item is one entry of a program under construction: a label definition, a
// plain instruction, or a jump that names its targets by label.
type item struct {
	label string          // defines a label at the next instruction
	ins   bpf.Instruction // a non-jump instruction
	// A conditional jump (jump == true, ja == ""): jt and jf name labels,
	// "" meaning the next instruction.
	jump   bool
	cond   bpf.JumpTest
	val    uint32
	jt, jf string
	ja     string // an unconditional jump to this label
}

// builder collects items; assemble resolves its labels.
type builder struct{ items []item }

func (b *builder) emit(ins bpf.Instruction) { b.items = append(b.items, item{ins: ins}) }
func (b *builder) mark(label string)        { b.items = append(b.items, item{label: label}) }
func (b *builder) jumpIf(cond bpf.JumpTest, val uint32, jt, jf string) {
	b.items = append(b.items, item{jump: true, cond: cond, val: val, jt: jt, jf: jf})
}
func (b *builder) jumpAlways(label string) { b.items = append(b.items, item{ja: label}) }

// assemble resolves labels into offsets and encodes the program. A
// conditional jump whose target is more than 255 instructions ahead is an
// error wrapping ErrJumpTooFar (use jumpAlways, whose offset has 32 bits, to
// go further); a backward jump or an unknown or duplicate label wraps
// ErrInvalidProgram. The result is validated.
func (b *builder) assemble() ([]bpf.RawInstruction, error) {
	labels := make(map[string]int)
	n := 0
	for _, it := range b.items {
		if it.label != "" {
			if _, dup := labels[it.label]; dup {
				return nil, fmt.Errorf("filter: label %q defined twice: %w", it.label, ErrInvalidProgram)
			}
			labels[it.label] = n
			continue
		}
		n++
	}
	skip := func(at int, label string, limit int) (int, error) {
		if label == "" {
			return 0, nil
		}
		target, ok := labels[label]
		if !ok {
			return 0, fmt.Errorf("filter: instruction %d: unknown label %q: %w", at, label, ErrInvalidProgram)
		}
		d := target - at - 1
		switch {
		case d < 0:
			return 0, fmt.Errorf("filter: instruction %d: backward jump to %q (instruction %d): %w", at, label, target, ErrInvalidProgram)
		case d > limit:
			return 0, fmt.Errorf("filter: instruction %d: jump to %q needs offset %d, limit %d: %w", at, label, d, limit, ErrJumpTooFar)
		}
		return d, nil
	}
	insns := make([]bpf.Instruction, 0, n)
	for _, it := range b.items {
		at := len(insns)
		switch {
		case it.label != "":
		case it.ja != "":
			d, err := skip(at, it.ja, int(^uint32(0)>>1))
			if err != nil {
				return nil, err
			}
			insns = append(insns, bpf.Jump{Skip: uint32(d)})
		case it.jump:
			t, err := skip(at, it.jt, 255)
			if err != nil {
				return nil, err
			}
			f, err := skip(at, it.jf, 255)
			if err != nil {
				return nil, err
			}
			insns = append(insns, bpf.JumpIf{Cond: it.cond, Val: it.val, SkipTrue: uint8(t), SkipFalse: uint8(f)})
		default:
			insns = append(insns, it.ins)
		}
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("filter: encode: %v: %w", err, ErrInvalidProgram)
	}
	if err := validate(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// validate checks what the kernel's seccomp loader would, and more: at most
// BPF_MAXINSNS instructions; only 4-byte absolute loads, aligned and inside
// the 64-byte seccomp_data; only jumps and constant returns otherwise; every
// jump lands inside the program; the last instruction returns; and every
// instruction survives a decode/encode round trip, so no bit is ambiguous.
func validate(raw []bpf.RawInstruction) error {
	if len(raw) == 0 || len(raw) > _BPF_MAXINSNS {
		return fmt.Errorf("filter: %d instructions, want 1 to %d: %w", len(raw), _BPF_MAXINSNS, ErrInvalidProgram)
	}
	inRange := func(i int, skip uint32) error {
		if uint64(i)+1+uint64(skip) >= uint64(len(raw)) {
			return fmt.Errorf("filter: instruction %d jumps %d past the end: %w", i, skip, ErrInvalidProgram)
		}
		return nil
	}
	for i, r := range raw {
		ins := r.Disassemble()
		switch ins := ins.(type) {
		case bpf.LoadAbsolute:
			if ins.Size != 4 || ins.Off%4 != 0 || ins.Off+4 > seccompDataSize {
				return fmt.Errorf("filter: instruction %d: load of %d bytes at offset %d, want 4 aligned bytes inside seccomp_data: %w",
					i, ins.Size, ins.Off, ErrInvalidProgram)
			}
		case bpf.Jump:
			if err := inRange(i, ins.Skip); err != nil {
				return err
			}
		case bpf.JumpIf:
			if err := inRange(i, uint32(ins.SkipTrue)); err != nil {
				return err
			}
			if err := inRange(i, uint32(ins.SkipFalse)); err != nil {
				return err
			}
		case bpf.RetConstant:
		default:
			return fmt.Errorf("filter: instruction %d: %v not allowed: %w", i, ins, ErrInvalidProgram)
		}
		back, err := ins.Assemble()
		if err != nil || back != r {
			return fmt.Errorf("filter: instruction %d: %#v does not round-trip: %w", i, r, ErrInvalidProgram)
		}
	}
	if _, ok := raw[len(raw)-1].Disassemble().(bpf.RetConstant); !ok {
		return fmt.Errorf("filter: last instruction is not a return: %w", ErrInvalidProgram)
	}
	return nil
}
