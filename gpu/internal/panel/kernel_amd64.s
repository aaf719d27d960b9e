//go:build !purego

#include "textflag.h"

// The 6×16 kernel of panel.go: C (6 rows × 16 columns) = A (6 rows × k) ·
// B (k rows of 16) (+ C), eight float32 lanes per ymm register.
// Y0-Y11 accumulate the tile (row i in Y(2i), Y(2i+1)); Y12:Y13 hold B's
// row, Y14 and Y15 the broadcast A elements. Each element is one FMA chain
// over k in order.

#define FMA2(bc, lo, hi) VFMADD231PS Y12, bc, lo; VFMADD231PS Y13, bc, hi

// STEP multiplies the A elements at byte offset AX of the six A rows (SI,
// DI, R10-R13) by the B row at BX, then moves AX on by R8 bytes and BX by
// R9.
#define STEP \
	VMOVUPS (BX), Y12; VMOVUPS 32(BX), Y13; \
	VBROADCASTSS (SI)(AX*1), Y14; FMA2(Y14, Y0, Y1); \
	VBROADCASTSS (DI)(AX*1), Y15; FMA2(Y15, Y2, Y3); \
	VBROADCASTSS (R10)(AX*1), Y14; FMA2(Y14, Y4, Y5); \
	VBROADCASTSS (R11)(AX*1), Y15; FMA2(Y15, Y6, Y7); \
	VBROADCASTSS (R12)(AX*1), Y14; FMA2(Y14, Y8, Y9); \
	VBROADCASTSS (R13)(AX*1), Y15; FMA2(Y15, Y10, Y11); \
	ADDQ R8, AX; ADDQ R9, BX

// ADDROW adds C's row at DX to the accumulators lo, hi and moves DX on.
#define ADDROW(lo, hi) VADDPS (DX), lo, lo; VADDPS 32(DX), hi, hi; ADDQ R9, DX

// PUTROW stores the accumulators lo, hi to C's row at DX and moves DX on.
#define PUTROW(lo, hi) VMOVUPS lo, (DX); VMOVUPS hi, 32(DX); ADDQ R9, DX

// ZERO_TILE clears the twelve accumulators.
#define ZERO_TILE \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; VXORPS Y9, Y9, Y9; VXORPS Y10, Y10, Y10; VXORPS Y11, Y11, Y11

// ADD_TILE adds the six C rows from DX on (stride R9) to the accumulators;
// PUT_TILE stores the accumulators there.
#define ADD_TILE ADDROW(Y0, Y1); ADDROW(Y2, Y3); ADDROW(Y4, Y5); ADDROW(Y6, Y7); ADDROW(Y8, Y9); ADDROW(Y10, Y11)
#define PUT_TILE PUTROW(Y0, Y1); PUTROW(Y2, Y3); PUTROW(Y4, Y5); PUTROW(Y6, Y7); PUTROW(Y8, Y9); PUTROW(Y10, Y11)

// KERNEL is the body of both kernels, with the tile's macros of one width:
// the arguments into registers, k steps four at a time, then C (+)= the tile.
#define KERNEL(ZERO, STEP1, ADDT, PUTT) \
	MOVQ a+0(FP), DX; MOVQ 0(DX), SI; MOVQ 8(DX), DI; \
	MOVQ 16(DX), R10; MOVQ 24(DX), R11; MOVQ 32(DX), R12; MOVQ 40(DX), R13; \
	MOVQ astep+8(FP), R8; SHLQ $2, R8; MOVQ b+16(FP), BX; MOVQ bstep+24(FP), R9; SHLQ $2, R9; \
	MOVQ k+32(FP), CX; XORQ AX, AX; ZERO; \
loop4: \
	CMPQ CX, $4; JL loop1; STEP1; STEP1; STEP1; STEP1; SUBQ $4, CX; JMP loop4; \
loop1: \
	TESTQ CX, CX; JZ store; STEP1; DECQ CX; JMP loop1; \
store: \
	MOVQ ldc+48(FP), R9; SHLQ $2, R9; MOVBLZX acc+56(FP), AX; TESTQ AX, AX; JZ put; \
	MOVQ c+40(FP), DX; ADDT; \
put: \
	MOVQ c+40(FP), DX; PUTT; VZEROUPPER; RET

// func kernel6x16s(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool)
TEXT ·kernel6x16s(SB), NOSPLIT, $0-57
	KERNEL(ZERO_TILE, STEP, ADD_TILE, PUT_TILE)

// The AVX-512 twin of kernel6x16s: a 6×32 tile, two zmm registers per
// row (Z0-Z11), B's row of 32 in Z12:Z13, broadcasts in Z14 and Z15.

#define FMA2Z(bc, lo, hi) VFMADD231PS Z12, bc, lo; VFMADD231PS Z13, bc, hi

#define STEPZ \
	VMOVUPS (BX), Z12; VMOVUPS 64(BX), Z13; \
	VBROADCASTSS (SI)(AX*1), Z14; FMA2Z(Z14, Z0, Z1); \
	VBROADCASTSS (DI)(AX*1), Z15; FMA2Z(Z15, Z2, Z3); \
	VBROADCASTSS (R10)(AX*1), Z14; FMA2Z(Z14, Z4, Z5); \
	VBROADCASTSS (R11)(AX*1), Z15; FMA2Z(Z15, Z6, Z7); \
	VBROADCASTSS (R12)(AX*1), Z14; FMA2Z(Z14, Z8, Z9); \
	VBROADCASTSS (R13)(AX*1), Z15; FMA2Z(Z15, Z10, Z11); \
	ADDQ R8, AX; ADDQ R9, BX

#define ADDROWZ(lo, hi) VADDPS (DX), lo, lo; VADDPS 64(DX), hi, hi; ADDQ R9, DX
#define PUTROWZ(lo, hi) VMOVUPS lo, (DX); VMOVUPS hi, 64(DX); ADDQ R9, DX

#define ZERO_TILEZ \
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; VPXORD Z9, Z9, Z9; VPXORD Z10, Z10, Z10; VPXORD Z11, Z11, Z11

#define ADD_TILEZ ADDROWZ(Z0, Z1); ADDROWZ(Z2, Z3); ADDROWZ(Z4, Z5); ADDROWZ(Z6, Z7); ADDROWZ(Z8, Z9); ADDROWZ(Z10, Z11)
#define PUT_TILEZ PUTROWZ(Z0, Z1); PUTROWZ(Z2, Z3); PUTROWZ(Z4, Z5); PUTROWZ(Z6, Z7); PUTROWZ(Z8, Z9); PUTROWZ(Z10, Z11)

// func kernel6x32s(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool)
TEXT ·kernel6x32s(SB), NOSPLIT, $0-57
	KERNEL(ZERO_TILEZ, STEPZ, ADD_TILEZ, PUT_TILEZ)

