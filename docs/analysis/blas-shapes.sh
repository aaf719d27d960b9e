#!/bin/sh
# blas-shapes.sh: one-thread GFLOP/s of the `base` learner step's products (one shard's 992
# rows) and a 1024³ product through OpenBLAS and through Debian's BLIS, side by side
# (docs/BENCHMARKS.md, "OpenBLAS kernel set"). BLIS is downloaded and unpacked into a
# temporary directory, not installed: installing it could switch the libblas.so.3 that
# PyTorch (the peer) loads. Needs gcc and libopenblas-dev.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
apt-get download libblis4-pthread >/dev/null
dpkg -x libblis4-pthread_*.deb root
blis=$dir/root/usr/lib/x86_64-linux-gnu/blis-pthread
cat > bench.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cblas.h>
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
	/* m, n, k, kind: 0 C = A·Bᵀ (forward), 1 C = A·B (input gradient), 2 C += Aᵀ·B (weight gradient) */
	struct { const char *name; int m, n, k, kind; } s[] = {
		{"qkv NT", 992, 384, 128, 0}, {"gate_up NT", 992, 768, 128, 0}, {"down NT", 992, 128, 384, 0},
		{"o NT", 992, 128, 128, 0}, {"down NN", 992, 128, 384, 1}, {"gate_up TN", 992, 768, 128, 2},
		{"sgemm 1024", 1024, 1024, 1024, 0},
	};
	float *a = malloc(4 << 22), *b = malloc(4 << 22), *c = malloc(4 << 22);
	for (int i = 0; i < 1 << 22; i++) { a[i] = (i % 7) * 0.01f; b[i] = (i % 5) * 0.01f; c[i] = 0; }
	for (int j = 0; j < 7; j++) {
		int m = s[j].m, n = s[j].n, k = s[j].k, reps = m * n * k > 1 << 28 ? 20 : 300;
		double best = 1e9;
		for (int r = 0; r < 3; r++) {
			double t0 = cpu();
			for (int i = 0; i < reps; i++) {
				if (s[j].kind == 0) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
				else if (s[j].kind == 1) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
				else cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1, a, n, b, k, 1, c, k);
			}
			double t = (cpu() - t0) / reps;
			if (t < best) best = t;
		}
		printf("  %-12s %8.1f us %6.1f GFLOP/s\n", s[j].name, best * 1e6, 2.0 * m * n * k / best / 1e9);
	}
	return 0;
}
C
inc=/usr/include/x86_64-linux-gnu/openblas-pthread
gcc -O2 -I$inc -o openblas bench.c -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas
gcc -O2 -I$inc -o blis bench.c -L"$blis" -l:libblis.so.4
grep -m1 'model name' /proc/cpuinfo
for round in 1 2; do
	echo "OpenBLAS (round $round)"; OPENBLAS_NUM_THREADS=1 ./openblas
	echo "BLIS (round $round)"; BLIS_NUM_THREADS=1 LD_LIBRARY_PATH="$blis" ./blis
done
