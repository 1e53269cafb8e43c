// Copyright 2026 The Playground Authors.
// Licensed under the Apache License, Version 2.0 (see main.go).

#include "textflag.h"

// func int80(trap, a1, a2, a3 uintptr) uintptr
//
// A system call through the i386 ABI: number in AX, arguments in BX, CX,
// DX, result in AX. The kernel runs it as a 32-bit (compat) call, which a
// seccomp filter sees with AUDIT_ARCH_I386.
TEXT ·int80(SB), NOSPLIT, $0-40
	MOVQ trap+0(FP), AX
	MOVQ a1+8(FP), BX
	MOVQ a2+16(FP), CX
	MOVQ a3+24(FP), DX
	INT  $0x80
	MOVQ AX, ret+32(FP)
	RET
