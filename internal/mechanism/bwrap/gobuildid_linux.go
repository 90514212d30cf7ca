package bwrap

import (
	"encoding/binary"
	"errors"
	"io"
)

// errNoBuildID: the file is not an ELF executable with a Go build ID note.
var errNoBuildID = errors.New("no Go build ID (not a Go ELF executable)")

// goBuildID reads the Go build ID of the ELF executable r, as `go tool
// buildid` prints it: the description of the note named "Go" of type 4
// (the Go linker's build ID note) in a PT_NOTE segment. It reads the ELF
// header, at most 64 program headers and note segments of at most 64 KiB
// each, and returns errNoBuildID for anything else: another format, a
// truncated or inconsistent header, a binary without the note.
func goBuildID(r io.ReaderAt) (string, error) {
	var hdr [64]byte
	if n, _ := r.ReadAt(hdr[:], 0); n < 52 || string(hdr[:4]) != "\x7fELF" {
		return "", errNoBuildID
	}
	var bo binary.ByteOrder
	switch hdr[5] {
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return "", errNoBuildID
	}
	// Where the program headers are, and where a header keeps a segment's
	// type, offset and size in the file, by class.
	var phoff uint64
	var phentsize, phnum, minEnt uint16
	var offAt, sizeAt int
	switch hdr[4] {
	case 1:
		phoff, phentsize, phnum = uint64(bo.Uint32(hdr[28:])), bo.Uint16(hdr[42:]), bo.Uint16(hdr[44:])
		minEnt, offAt, sizeAt = 32, 4, 16
	case 2:
		phoff, phentsize, phnum = bo.Uint64(hdr[32:]), bo.Uint16(hdr[54:]), bo.Uint16(hdr[56:])
		minEnt, offAt, sizeAt = 56, 8, 32
	default:
		return "", errNoBuildID
	}
	if phentsize < minEnt || phnum == 0 || phnum > 64 || phoff > 1<<32 {
		return "", errNoBuildID
	}
	phs := make([]byte, int(phentsize)*int(phnum))
	if n, _ := r.ReadAt(phs, int64(phoff)); n < len(phs) {
		return "", errNoBuildID
	}
	word := func(b []byte) uint64 {
		if hdr[4] == 1 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	for i := 0; i < int(phnum); i++ {
		ph := phs[i*int(phentsize):]
		const ptNote = 4
		if bo.Uint32(ph) != ptNote {
			continue
		}
		off, size := word(ph[offAt:]), word(ph[sizeAt:])
		if size > 64<<10 || off > 1<<32 {
			continue
		}
		seg := make([]byte, size)
		if n, _ := r.ReadAt(seg, int64(off)); n < len(seg) {
			continue
		}
		if id, ok := goNote(seg, bo); ok {
			return id, nil
		}
	}
	return "", errNoBuildID
}

// goNote finds the Go build ID note among the notes of seg.
func goNote(seg []byte, bo binary.ByteOrder) (string, bool) {
	const goBuildIDNote = 4
	align := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(seg) >= 12 {
		namesz, descsz, typ := uint64(bo.Uint32(seg)), uint64(bo.Uint32(seg[4:])), bo.Uint32(seg[8:])
		rest := uint64(len(seg) - 12)
		if align(namesz) > rest || align(descsz) > rest-align(namesz) {
			return "", false
		}
		name := seg[12 : 12+namesz]
		desc := seg[12+align(namesz) : 12+align(namesz)+descsz]
		if typ == goBuildIDNote && string(name) == "Go\x00\x00" && len(desc) > 0 {
			return string(desc), true
		}
		seg = seg[12+align(namesz)+align(descsz):]
	}
	return "", false
}
