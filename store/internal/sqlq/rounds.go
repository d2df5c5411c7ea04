package sqlq

// Rounds splits the indexes 0..n-1 into rounds in which no key repeats: the
// k-th index with a given key goes to round k, and every round keeps input
// order. A batch that names one job (or one unique key) more than once is
// applied round after round, so the later mention meets what the earlier
// one did. Most batches are one round.
func Rounds[K comparable](n int, key func(i int) K) [][]int {
	var rounds [][]int
	seen := make(map[K]int, n) // how many rounds each key is in
	for i := 0; i < n; i++ {
		k := key(i)
		r := seen[k]
		seen[k] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	return rounds
}

// Chunks calls fn with list split into consecutive parts of at most size
// items, in order, and returns the sum of what it returned. It stops at
// the first error and returns it with the sum so far.
func Chunks[T any](list []T, size int, fn func(part []T) (int64, error)) (int, error) {
	var sum int64
	for start := 0; start < len(list); start += size {
		n, err := fn(list[start:min(len(list), start+size)])
		if err != nil {
			return int(sum), err
		}
		sum += n
	}
	return int(sum), nil
}
