#include "textflag.h"

// func int80Getpid() uintptr
// getpid through the i386 system-call gate. Sound in a 64-bit process: the
// call takes no pointers and clobbers only AX (and the flags).
TEXT ·int80Getpid(SB),NOSPLIT,$0-8
	MOVL $20, AX
	INT $0x80
	MOVQ AX, ret+0(FP)
	RET
