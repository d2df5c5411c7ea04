package storekit

import (
	"cmp"
	"slices"

	"github.com/backlogq/backlog/core/contract"
)

// The claim-policy algorithm every store shares. A store gives
// ClaimLimited its reads (LimitedReads) and the room of the queue it
// locked (ClaimRoom: running counts, rate instants, fair cursor), and
// applies what ClaimLimited took; the order, the limits, the rates, fair
// turns and aging are decided here and nowhere else.

// LimitCandidate is a due job a limited claim may take, and, when the
// store read it whole, the job.
type LimitCandidate struct {
	ClaimCandidate
	Job *contract.Job
}

// CandidateFilter narrows a limited claim's candidate read: leave out the
// kinds and partition keys given (they are full), and, when set, read one
// priority level or one partition key only.
type CandidateFilter struct {
	FullKinds, FullParts []string
	// Priority, when not 0, reads only jobs of this priority (an aging
	// claim reads each level's oldest due jobs).
	Priority int
	// Partition, when not "", reads only jobs with this partition key (a
	// fair claim reads partition by partition).
	Partition string
}

// PriorityRange returns the priorities f reads, lowest and highest.
func (f CandidateFilter) PriorityRange() (int, int) {
	if f.Priority != 0 {
		return f.Priority, f.Priority
	}
	return contract.PriorityHighest, contract.PriorityLowest
}

// limitRounds bounds the candidate reads of one limited claim. Each round
// after the first runs only because candidates were left out (groups
// that filled up, which it then leaves out, or partitions read short).
const limitRounds = 8

// LimitedReads is what a store gives ClaimLimited, all running in the
// transaction that holds the queue's lock.
type LimitedReads struct {
	// Read returns up to n due candidates matching f in claim order
	// (priority, run_at, id).
	Read func(f CandidateFilter, n int) ([]LimitCandidate, error)
	// Take claims the candidates given (all of them, unless some were
	// taken by a writer outside the queue's lock, which it then skips)
	// and returns them as they now are.
	Take func([]LimitCandidate) ([]*contract.Job, error)
	// Partitions returns up to n partition keys, in order, after the one
	// given ("" = from the first), that have pending jobs (FairPartitions).
	Partitions func(after string, n int) ([]string, error)
	// ReadMany, optional, runs several reads at once (one round trip)
	// and returns their answers in the order of fs: an aging claim reads
	// ten priority levels, a fair one up to contract.FairPartitions+1 groups.
	ReadMany func(fs []CandidateFilter, ns []int) ([][]LimitCandidate, error)
	// Direct, optional, claims the first n due jobs in claim order in
	// one statement: ClaimLimited uses it when the room is ample for n
	// (ClaimRoom.Ample), so a queue whose limits are far from
	// reached claims as cheaply as it can.
	Direct func(n int) ([]*contract.Job, error)
}

// ClaimLimited takes up to limit jobs within room, in the order of the
// queue's policy (ClaimRoom.Pick): candidates in claim order; for
// an aging queue each priority level's oldest; for a fair queue those of
// up to contract.FairPartitions partition keys from the room's cursor, plus
// the head of the queue in claim order (where jobs without a key take
// their turn).
func ClaimLimited(limit int, room *ClaimRoom, r LimitedReads) ([]*contract.Job, error) {
	var (
		out   []*contract.Job
		parts []string
	)
	if want := min(limit, room.Left()); r.Direct != nil && want > 0 && room.Ample(want) {
		got, err := r.Direct(want)
		if err != nil {
			return nil, err
		}
		for _, j := range got {
			room.Take(j.Kind, j.PartitionKey) // fits: the room was ample
		}
		SortClaimOrder(got)
		return got, nil
	}
	if room.Fair() {
		var err error
		if parts, err = fairTurn(room, r.Partitions); err != nil {
			return nil, err
		}
	}
	for round := 0; round < limitRounds; round++ {
		want := min(limit-len(out), room.Left())
		if want <= 0 {
			break
		}
		f := CandidateFilter{FullKinds: room.FullKinds(), FullParts: room.FullPartitions()}
		var (
			cands []LimitCandidate
			short bool // a partition read returned all it was asked for: it may hold more
		)
		// The reads of this round: for a fair queue the queue's head and
		// each partition key's due jobs, for an aging queue each of those
		// per priority level; all at once where the store can.
		var (
			fs []CandidateFilter
			ns []int
		)
		if room.Fair() {
			per := (want + len(parts)) / (len(parts) + 1)
			for _, p := range append([]string{""}, parts...) {
				if p != "" && slices.Contains(f.FullParts, p) {
					continue
				}
				g := f
				g.Partition = p
				fs, ns = appendAged(room, fs, ns, g, per)
			}
		} else {
			fs, ns = appendAged(room, fs, ns, f, want)
		}
		res, err := readAll(r, fs, ns)
		if err != nil {
			return nil, err
		}
		seen := map[int64]bool{}
		for i, got := range res {
			if room.Fair() && len(got) == ns[i] {
				short = true
			}
			for _, c := range got {
				if !seen[c.ID] {
					seen[c.ID] = true
					cands = append(cands, c)
				}
			}
		}
		byID := make(map[int64]LimitCandidate, len(cands))
		plain := make([]ClaimCandidate, len(cands))
		for i, c := range cands {
			byID[c.ID], plain[i] = c, c.ClaimCandidate
		}
		picked, skipped := room.Pick(plain, want)
		if len(picked) > 0 {
			pick := make([]LimitCandidate, len(picked))
			for i, c := range picked {
				pick[i] = byID[c.ID]
			}
			got, err := r.Take(pick)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		if len(picked) == 0 || (!skipped && !short) {
			break // every candidate fitted and every read reached its end, or nothing fits
		}
	}
	SortClaimOrder(out)
	return out, nil
}

// appendAged adds the read of up to n candidates matching f to fs and
// ns; for a queue with priority aging, one read per priority level (the
// oldest of each, which aging lifts first) unless f names one.
func appendAged(room *ClaimRoom, fs []CandidateFilter, ns []int, f CandidateFilter, n int) ([]CandidateFilter, []int) {
	if room.Aging().IsZero() || f.Priority != 0 {
		return append(fs, f), append(ns, n)
	}
	for p := contract.PriorityHighest; p <= contract.PriorityLowest; p++ {
		g := f
		g.Priority = p
		fs, ns = append(fs, g), append(ns, n)
	}
	return fs, ns
}

// readAll runs the reads fs (up to ns[i] candidates each): in one go
// through ReadMany when the store has it, else one by one.
func readAll(r LimitedReads, fs []CandidateFilter, ns []int) ([][]LimitCandidate, error) {
	if r.ReadMany != nil && len(fs) > 1 {
		return r.ReadMany(fs, ns)
	}
	out := make([][]LimitCandidate, len(fs))
	for i, f := range fs {
		got, err := r.Read(f, ns[i])
		if err != nil {
			return nil, err
		}
		out[i] = got
	}
	return out, nil
}

// fairTurn returns the partition keys a fair claim reads this time: up
// to contract.FairPartitions after the room's cursor, going round to the
// first ones when the end is reached, and moves the cursor past them.
func fairTurn(room *ClaimRoom, partitions func(after string, n int) ([]string, error)) ([]string, error) {
	n, cur := contract.FairPartitions, room.FairCursor()
	parts, err := partitions(cur, n)
	if err != nil {
		return nil, err
	}
	if len(parts) == n {
		room.SetFairCursor(parts[n-1])
		return parts, nil
	}
	if cur == "" {
		room.SetFairCursor("")
		return parts, nil
	}
	more, err := partitions("", n-len(parts))
	if err != nil {
		return nil, err
	}
	next := ""
	for _, p := range more {
		if p > cur {
			break // read already, after the cursor
		}
		parts, next = append(parts, p), p
	}
	if len(parts) < n {
		next = "" // every partition was read: start from the first next time
	}
	room.SetFairCursor(next)
	return parts, nil
}

// SortClaimOrder sorts jobs by priority, run_at, id: claim order.
func SortClaimOrder(jobs []*contract.Job) {
	slices.SortFunc(jobs, func(a, b *contract.Job) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
