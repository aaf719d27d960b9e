package kernels

import (
	"slices"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// Embed gathers embedding rows: dst[r] = table[tokens[r]] for n rows of
// width d (dst [n, d], table [V, d], tokens [n] int32), as embed.
func Embed(rt cuda.Runtime, dst, table, tokens cuda.Ptr, n, d int) error {
	return launchRows(rt, "embed", n, rowThreads, dst, table, tokens, n, d)
}

// EmbedBackward adds dy's rows ([n, d]) to their tokens' rows of dtable
// ([V, d]) in row order, as embedBackward, from the grouping TokenRows
// builds (rows [n], offsets [u+1], uniq [u] int32s, uploaded).
func EmbedBackward(rt cuda.Runtime, dtable, dy, rows, offsets, uniq cuda.Ptr, u, d int) error {
	return launchRows(rt, "embed_backward", u, rowThreads, dtable, dy, rows, offsets, uniq, u, d)
}

// TokenRows groups rows by token for EmbedBackward: uniq lists the
// distinct tokens in increasing order, rows[offsets[i]:offsets[i+1]] are
// the rows holding uniq[i], ascending. It runs on the host, where the
// token ids come from.
func TokenRows(tokens []int32) (rows, offsets, uniq []int32) {
	count := map[int32]int32{}
	for _, t := range tokens {
		count[t]++
	}
	for t := range count {
		uniq = append(uniq, t)
	}
	slices.Sort(uniq)
	offsets = make([]int32, len(uniq)+1)
	at := make(map[int32]int32, len(uniq))
	for i, t := range uniq {
		at[t] = offsets[i]
		offsets[i+1] = offsets[i] + count[t]
	}
	rows = make([]int32, len(tokens))
	for r, t := range tokens {
		rows[at[t]] = int32(r)
		at[t]++
	}
	return rows, offsets, uniq
}
