//go:build !purego

#include "textflag.h"

// AVX2 + FMA kernels of vec_amd64.go (package vec), eight float32 lanes at a time. A row
// whose length is not a multiple of 8 ends with one masked load and store
// (VMASKMOVPS), so no kernel reads or writes past its slices. Ymm registers
// Y10-Y15 hold the constants of EXP_Y0 in the kernels that use it.
//
// Every instruction on a vector register is VEX-encoded (VMOVQ, VMOVSS, not
// MOVQ, MOVSS): on Intel CPUs a legacy SSE write to an xmm register while
// the upper halves are in use costs a state transition, which made each
// masked tail ~20x slower on a Xeon (gpu's TestAssemblyIsVEX checks).

// A float32 constant repeated over the 8 lanes of a ymm register.
#define VEC8(name, bits) \
	DATA name+0(SB)/4, $bits; DATA name+4(SB)/4, $bits; DATA name+8(SB)/4, $bits; DATA name+12(SB)/4, $bits; \
	DATA name+16(SB)/4, $bits; DATA name+20(SB)/4, $bits; DATA name+24(SB)/4, $bits; DATA name+28(SB)/4, $bits; \
	GLOBL name(SB), RODATA|NOPTR, $32

VEC8(expLo<>, 0xc2ae999a)    // -87.3: e^x is 2^-126·e^r there, the smallest normal exponent
VEC8(expHi<>, 0x42b0999a)    // 88.3: 2^127·e^r, the largest finite exponent
VEC8(expLog2e<>, 0x3fb8aa3b) // log2(e)
VEC8(expC1<>, 0x3f318000)    // ln 2 = C1 + C2, C1 with 9 significant bits (n·C1 is exact)
VEC8(expC2<>, 0xb95e8083)
VEC8(one<>, 0x3f800000)
VEC8(expP0<>, 0x39506967) // e^r ≈ 1 + r + r²·(P5 + r·(P4 + r·(P3 + r·(P2 + r·(P1 + r·P0))))), |r| ≤ ln2/2
VEC8(expP1<>, 0x3ab743ce) // (the Cephes expf coefficients: relative error about 1e-7)
VEC8(expP2<>, 0x3c088908)
VEC8(expP3<>, 0x3d2aa9c1)
VEC8(expP4<>, 0x3e2aaaaa)
VEC8(expP5<>, 0x3f000000)

DATA lanes<>+0(SB)/4, $0
DATA lanes<>+4(SB)/4, $1
DATA lanes<>+8(SB)/4, $2
DATA lanes<>+12(SB)/4, $3
DATA lanes<>+16(SB)/4, $4
DATA lanes<>+20(SB)/4, $5
DATA lanes<>+24(SB)/4, $6
DATA lanes<>+28(SB)/4, $7
GLOBL lanes<>(SB), RODATA|NOPTR, $32

// EXP_CONSTS loads the constants of EXP_Y0 into Y10-Y15.
#define EXP_CONSTS \
	VMOVUPS expLo<>(SB), Y15; VMOVUPS expHi<>(SB), Y14; VMOVUPS expLog2e<>(SB), Y13; \
	VMOVUPS expC1<>(SB), Y12; VMOVUPS expC2<>(SB), Y11; VMOVUPS one<>(SB), Y10

// EXP_Y0 replaces the 8 lanes x of Y0 by e^x, clobbering Y1-Y4: x is
// clamped to [-87.3, 88.3] (NaN stays NaN: the clamps return their second
// source, x, when it is NaN), n = round(x·log2 e), r = x − n·ln 2 in two
// steps, e^x = e^r·2^n with 2^n built in the exponent bits (n<<23 plus the
// bits of 1.0, which are 127<<23).
#define EXP_Y0 \
	VMAXPS Y0, Y15, Y0; VMINPS Y0, Y14, Y0; \
	VMULPS Y13, Y0, Y1; VROUNDPS $0, Y1, Y1; \
	VFNMADD231PS Y12, Y1, Y0; VFNMADD231PS Y11, Y1, Y0; \
	VMULPS Y0, Y0, Y2; VMOVUPS expP0<>(SB), Y3; \
	VFMADD213PS expP1<>(SB), Y0, Y3; VFMADD213PS expP2<>(SB), Y0, Y3; VFMADD213PS expP3<>(SB), Y0, Y3; \
	VFMADD213PS expP4<>(SB), Y0, Y3; VFMADD213PS expP5<>(SB), Y0, Y3; \
	VFMADD213PS Y0, Y2, Y3; VADDPS Y10, Y3, Y3; \
	VCVTPS2DQ Y1, Y4; VPSLLD $23, Y4, Y4; VPADDD Y10, Y4, Y0; VMULPS Y3, Y0, Y0

// TAIL_MASK sets the lanes i < CX (1 ≤ CX ≤ 7) of Y8 to all ones and the
// others to zero, for VMASKMOVPS; it clobbers Y4.
#define TAIL_MASK \
	VMOVQ CX, X8; VPBROADCASTD X8, Y8; VMOVDQU lanes<>(SB), Y4; VPCMPGTD Y4, Y8, Y8

// HSUM_Y0_X0 adds the 8 float32 lanes of Y0 into the low lane of X0.
#define HSUM_Y0_X0 \
	VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; VHADDPS X0, X0, X0; VHADDPS X0, X0, X0

// func expShiftAVX2(dst, z []float32, shift, scale float32) float64
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ z_base+24(FP), SI
	MOVQ z_len+32(FP), CX
	VBROADCASTSS shift+48(FP), Y7
	VBROADCASTSS scale+52(FP), Y6
	EXP_CONSTS
	VXORPD Y5, Y5, Y5
	VXORPD Y9, Y9, Y9

expshift_loop:
	CMPQ CX, $8
	JL   expshift_tail
	VMOVUPS (SI), Y0
	VSUBPS  Y7, Y0, Y0
	VMULPS  Y6, Y0, Y0
	EXP_Y0
	VMOVUPS Y0, (DI)
	VCVTPS2PD    X0, Y1
	VADDPD       Y1, Y5, Y5
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	VADDPD       Y2, Y9, Y9
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  expshift_loop

expshift_tail:
	TESTQ CX, CX
	JZ    expshift_done
	TAIL_MASK
	VMASKMOVPS (SI), Y8, Y0
	VSUBPS     Y7, Y0, Y0
	VMULPS     Y6, Y0, Y0
	EXP_Y0
	VANDPS     Y8, Y0, Y0
	VMASKMOVPS Y0, Y8, (DI)
	VCVTPS2PD    X0, Y1
	VADDPD       Y1, Y5, Y5
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	VADDPD       Y2, Y9, Y9

expshift_done:
	VADDPD       Y9, Y5, Y5
	VEXTRACTF128 $1, Y5, X9
	VADDPD       X9, X5, X5
	VHADDPD      X5, X5, X5
	VMOVSD        X5, ret+56(FP)
	VZEROUPPER
	RET

// SWIGLU_Y5 computes, for the gate lanes g in Y5, σ(g) = 1/(1+e^−g) in Y1
// and g·σ(g) in Y2 (Y9 must be zero), clobbering Y0, Y3 and Y4. The
// reciprocal is VRCPPS's 12-bit estimate r refined by one Newton step,
// r + r·(1 − d·r) (about 1e-7 relative; several times cheaper than VDIVPS).
#define SWIGLU_Y5 \
	VSUBPS Y5, Y9, Y0; EXP_Y0; VADDPS Y10, Y0, Y0; \
	VRCPPS Y0, Y1; VMOVAPS Y10, Y3; VFNMADD231PS Y1, Y0, Y3; VFMADD231PS Y3, Y1, Y1; VMULPS Y1, Y5, Y2

// func swigluAVX2(y, sg, g, u []float32)
TEXT ·swigluAVX2(SB), NOSPLIT, $0-96
	MOVQ y_base+0(FP), DI
	MOVQ sg_base+24(FP), DX
	MOVQ g_base+48(FP), SI
	MOVQ g_len+56(FP), CX
	MOVQ u_base+72(FP), BX
	EXP_CONSTS
	VXORPS Y9, Y9, Y9

swiglu_loop:
	CMPQ CX, $8
	JL   swiglu_tail
	VMOVUPS (SI), Y5
	SWIGLU_Y5
	VMOVUPS Y1, (DX)
	VMULPS  (BX), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  swiglu_loop

swiglu_tail:
	TESTQ CX, CX
	JZ    swiglu_done
	TAIL_MASK
	VMASKMOVPS (SI), Y8, Y5
	SWIGLU_Y5
	VMASKMOVPS Y1, Y8, (DX)
	VMASKMOVPS (BX), Y8, Y3
	VMULPS     Y3, Y2, Y2
	VMASKMOVPS Y2, Y8, (DI)

swiglu_done:
	VZEROUPPER
	RET

// SWIGLU_BACK computes from dy (Y0), g (Y1), u (Y2) and σ (Y3) the gate
// gradient dy·u·σ·(1 + g·(1−σ)) in Y5 and the up gradient dy·g·σ in Y6.
#define SWIGLU_BACK \
	VSUBPS Y3, Y10, Y4; VMULPS Y4, Y1, Y4; VADDPS Y10, Y4, Y4; \
	VMULPS Y3, Y0, Y0; VMULPS Y2, Y0, Y5; VMULPS Y4, Y5, Y5; VMULPS Y1, Y0, Y6

// func swigluBackAVX2(dg, du, dy, g, u, sg []float32)
TEXT ·swigluBackAVX2(SB), NOSPLIT, $0-144
	MOVQ dg_base+0(FP), DI
	MOVQ du_base+24(FP), R8
	MOVQ dy_base+48(FP), R9
	MOVQ g_base+72(FP), SI
	MOVQ g_len+80(FP), CX
	MOVQ u_base+96(FP), BX
	MOVQ sg_base+120(FP), DX
	VMOVUPS one<>(SB), Y10

swiglub_loop:
	CMPQ CX, $8
	JL   swiglub_tail
	VMOVUPS (R9), Y0
	VMOVUPS (SI), Y1
	VMOVUPS (BX), Y2
	VMOVUPS (DX), Y3
	SWIGLU_BACK
	VMOVUPS Y5, (DI)
	VMOVUPS Y6, (R8)
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DX
	SUBQ $8, CX
	JMP  swiglub_loop

swiglub_tail:
	TESTQ CX, CX
	JZ    swiglub_done
	TAIL_MASK
	VMASKMOVPS (R9), Y8, Y0
	VMASKMOVPS (SI), Y8, Y1
	VMASKMOVPS (BX), Y8, Y2
	VMASKMOVPS (DX), Y8, Y3
	SWIGLU_BACK
	VMASKMOVPS Y5, Y8, (DI)
	VMASKMOVPS Y6, Y8, (R8)

swiglub_done:
	VZEROUPPER
	RET

// func dotAVX2(a, b []float32) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), BX
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

dot_loop32:
	CMPQ CX, $32
	JL   dot_loop8
	VMOVUPS     (SI), Y1
	VFMADD231PS (BX), Y1, Y0
	VMOVUPS     32(SI), Y2
	VFMADD231PS 32(BX), Y2, Y5
	VMOVUPS     64(SI), Y3
	VFMADD231PS 64(BX), Y3, Y6
	VMOVUPS     96(SI), Y4
	VFMADD231PS 96(BX), Y4, Y7
	ADDQ $128, SI
	ADDQ $128, BX
	SUBQ $32, CX
	JMP  dot_loop32

dot_loop8:
	CMPQ CX, $8
	JL   dot_tail
	VMOVUPS     (SI), Y1
	VFMADD231PS (BX), Y1, Y0
	ADDQ $32, SI
	ADDQ $32, BX
	SUBQ $8, CX
	JMP  dot_loop8

dot_tail:
	TESTQ CX, CX
	JZ    dot_done
	TAIL_MASK
	VMASKMOVPS  (SI), Y8, Y1
	VMASKMOVPS  (BX), Y8, Y2
	VFMADD231PS Y2, Y1, Y0

dot_done:
	VADDPS Y5, Y0, Y0
	VADDPS Y7, Y6, Y6
	VADDPS Y6, Y0, Y0
	HSUM_Y0_X0
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// func dot3AVX2(a, b, c []float32) float32
TEXT ·dot3AVX2(SB), NOSPLIT, $0-76
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), BX
	MOVQ c_base+48(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5

dot3_loop16:
	CMPQ CX, $16
	JL   dot3_loop8
	VMOVUPS     (SI), Y1
	VMULPS      (BX), Y1, Y1
	VFMADD231PS (DX), Y1, Y0
	VMOVUPS     32(SI), Y2
	VMULPS      32(BX), Y2, Y2
	VFMADD231PS 32(DX), Y2, Y5
	ADDQ $64, SI
	ADDQ $64, BX
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  dot3_loop16

dot3_loop8:
	CMPQ CX, $8
	JL   dot3_tail
	VMOVUPS     (SI), Y1
	VMULPS      (BX), Y1, Y1
	VFMADD231PS (DX), Y1, Y0
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DX
	SUBQ $8, CX
	JMP  dot3_loop8

dot3_tail:
	TESTQ CX, CX
	JZ    dot3_done
	TAIL_MASK
	VMASKMOVPS  (SI), Y8, Y1
	VMASKMOVPS  (BX), Y8, Y2
	VMASKMOVPS  (DX), Y8, Y3
	VMULPS      Y2, Y1, Y1
	VFMADD231PS Y3, Y1, Y0

dot3_done:
	VADDPS Y5, Y0, Y0
	HSUM_Y0_X0
	VMOVSS X0, ret+72(FP)
	VZEROUPPER
	RET

// func scaleMulAVX2(y, x, w []float32, s float32)
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-76
	MOVQ y_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	MOVQ w_base+48(FP), BX
	VBROADCASTSS s+72(FP), Y7

smul_loop:
	CMPQ CX, $8
	JL   smul_tail
	VMULPS  (SI), Y7, Y0
	VMULPS  (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  smul_loop

smul_tail:
	TESTQ CX, CX
	JZ    smul_done
	TAIL_MASK
	VMASKMOVPS (SI), Y8, Y0
	VMASKMOVPS (BX), Y8, Y1
	VMULPS     Y7, Y0, Y0
	VMULPS     Y1, Y0, Y0
	VMASKMOVPS Y0, Y8, (DI)

smul_done:
	VZEROUPPER
	RET

// func rmsBackAVX2(dx, dy, x, w []float32, s, c float32)
TEXT ·rmsBackAVX2(SB), NOSPLIT, $0-104
	MOVQ dx_base+0(FP), DI
	MOVQ dy_base+24(FP), SI
	MOVQ dy_len+32(FP), CX
	MOVQ x_base+48(FP), BX
	MOVQ w_base+72(FP), DX
	VBROADCASTSS s+96(FP), Y7
	VBROADCASTSS c+100(FP), Y6

rmsb_loop:
	CMPQ CX, $8
	JL   rmsb_tail
	VMULPS       (SI), Y7, Y0
	VMULPS       (DX), Y0, Y0
	VADDPS       (DI), Y0, Y0
	VMOVUPS      (BX), Y1
	VFNMADD231PS Y6, Y1, Y0
	VMOVUPS      Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  rmsb_loop

rmsb_tail:
	TESTQ CX, CX
	JZ    rmsb_done
	TAIL_MASK
	VMASKMOVPS   (SI), Y8, Y0
	VMASKMOVPS   (DX), Y8, Y2
	VMASKMOVPS   (DI), Y8, Y3
	VMASKMOVPS   (BX), Y8, Y1
	VMULPS       Y7, Y0, Y0
	VMULPS       Y2, Y0, Y0
	VADDPS       Y3, Y0, Y0
	VFNMADD231PS Y6, Y1, Y0
	VMASKMOVPS   Y0, Y8, (DI)

rmsb_done:
	VZEROUPPER
	RET

// func mulAddAVX2(dst, a, b []float32, s float32)
TEXT ·mulAddAVX2(SB), NOSPLIT, $0-76
	MOVQ dst_base+0(FP), DI
	MOVQ a_base+24(FP), SI
	MOVQ a_len+32(FP), CX
	MOVQ b_base+48(FP), BX
	VBROADCASTSS s+72(FP), Y7

madd_loop:
	CMPQ CX, $8
	JL   madd_tail
	VMULPS      (SI), Y7, Y0
	VMOVUPS     (DI), Y1
	VFMADD231PS (BX), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  madd_loop

madd_tail:
	TESTQ CX, CX
	JZ    madd_done
	TAIL_MASK
	VMASKMOVPS  (SI), Y8, Y0
	VMASKMOVPS  (BX), Y8, Y2
	VMASKMOVPS  (DI), Y8, Y1
	VMULPS      Y7, Y0, Y0
	VFMADD231PS Y2, Y0, Y1
	VMASKMOVPS  Y1, Y8, (DI)

madd_done:
	VZEROUPPER
	RET

// func scaleAVX2(x []float32, s float32)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), CX
	VBROADCASTSS s+24(FP), Y7

scale_loop:
	CMPQ CX, $8
	JL   scale_tail
	VMULPS  (DI), Y7, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  scale_loop

scale_tail:
	TESTQ CX, CX
	JZ    scale_done
	TAIL_MASK
	VMASKMOVPS (DI), Y8, Y0
	VMULPS     Y7, Y0, Y0
	VMASKMOVPS Y0, Y8, (DI)

scale_done:
	VZEROUPPER
	RET

// func maxAVX2(x []float32) float32; len(x) ≥ 8. The last block overlaps
// the one before it (max is idempotent).
TEXT ·maxAVX2(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	LEAQ -32(SI)(CX*4), DX // the last 8 elements
	VMOVUPS (DX), Y0

max_loop:
	CMPQ CX, $8
	JL   max_done
	VMAXPS (SI), Y0, Y0
	ADDQ $32, SI
	SUBQ $8, CX
	JMP  max_loop

max_done:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func scoresAVX2(sc, q, k []float32, stride int, scale float32); len(q) a
// positive multiple of 8.
TEXT ·scoresAVX2(SB), NOSPLIT, $0-84
	MOVQ sc_base+0(FP), DI
	MOVQ sc_len+8(FP), CX
	MOVQ q_base+24(FP), SI
	MOVQ q_len+32(FP), R8
	MOVQ k_base+48(FP), BX
	MOVQ stride+72(FP), R9
	SHLQ $2, R9
	VMOVSS scale+80(FP), X7

scores_key:
	TESTQ CX, CX
	JZ    scores_done
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX
	MOVQ   R8, DX

scores_inner:
	VMOVUPS     (SI)(AX*4), Y1
	VFMADD231PS (BX)(AX*4), Y1, Y0
	ADDQ $8, AX
	SUBQ $8, DX
	JNZ  scores_inner
	HSUM_Y0_X0
	VMULSS X7, X0, X0
	VMOVSS  X0, (DI)
	ADDQ   $4, DI
	ADDQ   R9, BX
	DECQ   CX
	JMP    scores_key

scores_done:
	VZEROUPPER
	RET

// func mixAVX2(o, p, v []float32, stride int); len(o) a positive multiple
// of 8. Columns go 32 at a time (four accumulators), then 8 at a time.
TEXT ·mixAVX2(SB), NOSPLIT, $0-80
	MOVQ o_base+0(FP), DI
	MOVQ o_len+8(FP), R8
	MOVQ p_base+24(FP), SI
	MOVQ p_len+32(FP), R10
	MOVQ v_base+48(FP), BX
	MOVQ stride+72(FP), R9
	SHLQ $2, R9

mix_block32:
	CMPQ R8, $32
	JL   mix_block8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   BX, DX
	XORQ   AX, AX

mix_key32:
	CMPQ AX, R10
	JGE  mix_store32
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (DX), Y4, Y0
	VFMADD231PS  32(DX), Y4, Y1
	VFMADD231PS  64(DX), Y4, Y2
	VFMADD231PS  96(DX), Y4, Y3
	ADDQ R9, DX
	INCQ AX
	JMP  mix_key32

mix_store32:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, BX
	SUBQ $32, R8
	JMP  mix_block32

mix_block8:
	CMPQ R8, $8
	JL   mix_done
	VXORPS Y0, Y0, Y0
	MOVQ   BX, DX
	XORQ   AX, AX

mix_key8:
	CMPQ AX, R10
	JGE  mix_store8
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (DX), Y4, Y0
	ADDQ R9, DX
	INCQ AX
	JMP  mix_key8

mix_store8:
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, BX
	SUBQ $8, R8
	JMP  mix_block8

mix_done:
	VZEROUPPER
	RET

// func ropeHeadsAVX2(v []float32, heads int, c, s []float32, sign float32):
// with a head [x1, x2] (len(c) floats each, len(c) a positive multiple of
// 8), x1 ← x1·c − sign·x2·s and x2 ← x2·c + sign·x1·s, on each of heads
// consecutive heads of v.
TEXT ·ropeHeadsAVX2(SB), NOSPLIT, $0-84
	MOVQ v_base+0(FP), DI
	MOVQ heads+24(FP), R8
	MOVQ c_base+32(FP), R9
	MOVQ c_len+40(FP), R10
	MOVQ s_base+56(FP), R11
	VBROADCASTSS sign+80(FP), Y7
	SHLQ $2, R10 // half, in bytes

ropeh_head:
	TESTQ R8, R8
	JZ    ropeh_done
	LEAQ (DI)(R10*1), DX // the second half of this head
	MOVQ R9, SI
	MOVQ R11, BX
	MOVQ R10, CX

ropeh_loop:
	VMOVUPS      (DI), Y0
	VMOVUPS      (DX), Y1
	VMOVUPS      (SI), Y2
	VMULPS       (BX), Y7, Y3
	VMULPS       Y2, Y0, Y4
	VFNMADD231PS Y3, Y1, Y4
	VMULPS       Y2, Y1, Y5
	VFMADD231PS  Y3, Y0, Y5
	VMOVUPS      Y4, (DI)
	VMOVUPS      Y5, (DX)
	ADDQ $32, DI
	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, BX
	SUBQ $32, CX
	JNZ  ropeh_loop
	MOVQ DX, DI // the next head starts after this one's second half
	DECQ R8
	JMP  ropeh_head

ropeh_done:
	VZEROUPPER
	RET

// func mulAffineAVX2(dst, x, p []float32, c0, c1 float32)
TEXT ·mulAffineAVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	MOVQ p_base+48(FP), BX
	VBROADCASTSS c0+72(FP), Y7
	VBROADCASTSS c1+76(FP), Y6

maff_loop:
	CMPQ CX, $8
	JL   maff_tail
	VMOVUPS     (SI), Y0
	VMOVAPS     Y7, Y1
	VFMADD231PS Y6, Y0, Y1 // c0 + c1·x
	VMULPS      (BX), Y1, Y1
	VMOVUPS     Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  maff_loop

maff_tail:
	TESTQ CX, CX
	JZ    maff_done
	TAIL_MASK
	VMASKMOVPS  (SI), Y8, Y0
	VMASKMOVPS  (BX), Y8, Y2
	VMOVAPS     Y7, Y1
	VFMADD231PS Y6, Y0, Y1
	VMULPS      Y2, Y1, Y1
	VMASKMOVPS  Y1, Y8, (DI)

maff_done:
	VZEROUPPER
	RET

// ADAMW_Y computes one AdamW step for the 8 lanes of w (Y4), g (Y0), m
// (Y1) and v (Y2), with the coefficient table of AdamWCoeffs.broadcast at
// R8: m' in Y1, v' in Y2, w' in Y6; it clobbers Y3 and Y5. No fused
// multiply-adds, so that it rounds as AdamWElement does.
#define ADAMW_Y \
	VMULPS 0(R8), Y1, Y1; VMULPS 32(R8), Y0, Y3; VADDPS Y3, Y1, Y1; \
	VMULPS 64(R8), Y2, Y2; VMULPS 96(R8), Y0, Y3; VMULPS Y0, Y3, Y3; VADDPS Y3, Y2, Y2; \
	VSQRTPS Y2, Y3; VMULPS 160(R8), Y3, Y3; VADDPS 192(R8), Y3, Y3; \
	VMULPS 128(R8), Y1, Y5; VDIVPS Y3, Y5, Y5; \
	VMULPS 224(R8), Y4, Y6; VSUBPS Y5, Y6, Y6

// ADAMW_LOAD loads 8 lanes of w, g, m, v (at DI, SI, BX, DX) into Y4, Y0,
// Y1, Y2; ADAMW_LOAD_TAIL the first CX of them (the mask in Y8); ADAMW_NEXT
// moves the four pointers on by 8 lanes.
#define ADAMW_LOAD \
	VMOVUPS (DI), Y4; VMOVUPS (SI), Y0; VMOVUPS (BX), Y1; VMOVUPS (DX), Y2
#define ADAMW_LOAD_TAIL \
	TAIL_MASK; VMASKMOVPS (DI), Y8, Y4; VMASKMOVPS (SI), Y8, Y0; VMASKMOVPS (BX), Y8, Y1; VMASKMOVPS (DX), Y8, Y2
#define ADAMW_NEXT \
	ADDQ $32, DI; ADDQ $32, SI; ADDQ $32, BX; ADDQ $32, DX; SUBQ $8, CX

// func adamwAVX2(w, g, m, v []float32, k *[64]float32)
TEXT ·adamwAVX2(SB), NOSPLIT, $0-104
	MOVQ w_base+0(FP), DI
	MOVQ w_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ m_base+48(FP), BX
	MOVQ v_base+72(FP), DX
	MOVQ k+96(FP), R8

adamw_loop:
	CMPQ CX, $8
	JL   adamw_tail
	ADAMW_LOAD
	ADAMW_Y
	VMOVUPS Y6, (DI)
	VMOVUPS Y1, (BX)
	VMOVUPS Y2, (DX)
	ADAMW_NEXT
	JMP adamw_loop

adamw_tail:
	TESTQ CX, CX
	JZ    adamw_done
	ADAMW_LOAD_TAIL
	ADAMW_Y
	VMASKMOVPS Y6, Y8, (DI)
	VMASKMOVPS Y1, Y8, (BX)
	VMASKMOVPS Y2, Y8, (DX)

adamw_done:
	VZEROUPPER
	RET

// ADAMW_SUMS adds, for the lanes of w' (Y6) and w (Y4), (w' − w)² to the
// float64 sums in Y10 and w² to those in Y11, and x − x of w', m' and v'
// to Y7 (NaN once any of them is not finite; a negative v' makes w' NaN
// through its square root). It clobbers Y0, Y3.
#define ADAMW_SUMS \
	VSUBPS Y6, Y6, Y0; VADDPS Y0, Y7, Y7; VSUBPS Y1, Y1, Y0; VADDPS Y0, Y7, Y7; \
	VSUBPS Y2, Y2, Y0; VADDPS Y0, Y7, Y7; \
	VCVTPS2PD X6, Y0; VCVTPS2PD X4, Y3; VSUBPD Y3, Y0, Y0; VMULPD Y0, Y0, Y0; VADDPD Y0, Y10, Y10; \
	VMULPD Y3, Y3, Y3; VADDPD Y3, Y11, Y11; \
	VEXTRACTF128 $1, Y6, X0; VEXTRACTF128 $1, Y4, X3; VCVTPS2PD X0, Y0; VCVTPS2PD X3, Y3; \
	VSUBPD Y3, Y0, Y0; VMULPD Y0, Y0, Y0; VADDPD Y0, Y10, Y10; VMULPD Y3, Y3, Y3; VADDPD Y3, Y11, Y11

// func adamwPreviewAVX2(w, g, m, v []float32, k *[64]float32) (delta, norm float64, ok bool)
TEXT ·adamwPreviewAVX2(SB), NOSPLIT, $0-121
	MOVQ w_base+0(FP), DI
	MOVQ w_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ m_base+48(FP), BX
	MOVQ v_base+72(FP), DX
	MOVQ k+96(FP), R8
	VXORPS Y7, Y7, Y7
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11

adamwp_loop:
	CMPQ CX, $8
	JL   adamwp_tail
	ADAMW_LOAD
	ADAMW_Y
	ADAMW_SUMS
	ADAMW_NEXT
	JMP adamwp_loop

adamwp_tail:
	TESTQ CX, CX
	JZ    adamwp_done
	ADAMW_LOAD_TAIL // the masked-off lanes load zeros: their step is 0 and finite
	ADAMW_Y
	ADAMW_SUMS

adamwp_done:
	VEXTRACTF128 $1, Y10, X0
	VADDPD       X0, X10, X10
	VHADDPD      X10, X10, X10
	VMOVSD        X10, delta+104(FP)
	VEXTRACTF128 $1, Y11, X0
	VADDPD       X0, X11, X11
	VHADDPD      X11, X11, X11
	VMOVSD        X11, norm+112(FP)
	VCMPPS       $3, Y7, Y7, Y1 // unordered: a lane saw a NaN
	VMOVMSKPS    Y1, AX
	TESTL        AX, AX
	SETEQ        ok+120(FP)
	VZEROUPPER
	RET
