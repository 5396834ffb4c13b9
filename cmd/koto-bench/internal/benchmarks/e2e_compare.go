package benchmarks

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// E2EResult is the throughput of one variant, summed over rounds.
type E2EResult struct {
	// Variant is the variant measured.
	Variant E2EVariant
	// Messages is how many messages it handled over all rounds.
	Messages int
	// Elapsed is the time they took, first message to last in each run.
	Elapsed time.Duration
	// Ratio is Rate over the Rate of Variant.Baseline; 0 for a baseline.
	Ratio float64
	// MinRatio and MaxRatio are the least and the greatest ratio to the
	// baseline in one round, each run compared with the baseline's run of
	// the same round: how much the machine's noise moves the ratio.
	MinRatio, MaxRatio float64
	// AlsoRatio, AlsoMinRatio and AlsoMaxRatio are the same to
	// Variant.Also; 0 without one.
	AlsoRatio, AlsoMinRatio, AlsoMaxRatio float64
	rounds                                []float64 // the rate of each round's run
}

// Rate returns messages per second.
func (r E2EResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

// E2ERunner runs a variant with n messages and returns the time they took:
// [E2E.Consume] or [E2E.Direct].
type E2ERunner func(ctx context.Context, v E2EVariant, n int) (time.Duration, error)

// CompareE2E runs each variant rounds times with n messages per run (or
// the variant's Messages), with run, rotating the order in every round so that no variant always gets
// the warmest or the coldest machine, and sums each one's messages and
// time. It returns one result per variant, in the order given, with the
// ratios to its baseline, which must be among them.
func CompareE2E(ctx context.Context, run E2ERunner, variants []E2EVariant, n, rounds int) ([]E2EResult, error) {
	out := make([]E2EResult, len(variants))
	for i, v := range variants {
		out[i].Variant = v
	}
	for round := range max(rounds, 1) {
		for j := range variants {
			i := (j + round) % len(variants)
			m := cmp.Or(variants[i].Messages, n)
			d, err := run(ctx, variants[i], m)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", variants[i].Name, round+1, err)
			}
			out[i].Messages += m
			out[i].Elapsed += d
			out[i].rounds = append(out[i].rounds, float64(m)/d.Seconds())
		}
	}
	return out, setRatios(out)
}

// setRatios fills in each result's ratios to its baseline's, and to its
// Also's.
func setRatios(results []E2EResult) error {
	byName := map[string]E2EResult{}
	for _, r := range results {
		byName[r.Variant.Name] = r
	}
	for i, r := range results {
		for _, to := range []struct {
			name               string
			ratio, least, most *float64
		}{
			{r.Variant.Baseline, &results[i].Ratio, &results[i].MinRatio, &results[i].MaxRatio},
			{r.Variant.Also, &results[i].AlsoRatio, &results[i].AlsoMinRatio, &results[i].AlsoMaxRatio},
		} {
			if to.name == "" {
				continue
			}
			base, ok := byName[to.name]
			if !ok {
				return fmt.Errorf("variant %q: baseline %q was not measured", r.Variant.Name, to.name)
			}
			*to.ratio, *to.least, *to.most = r.versus(base)
		}
	}
	return nil
}

// versus returns r's rate over base's, and the least and the greatest of
// that ratio in one round.
func (r E2EResult) versus(base E2EResult) (ratio, least, most float64) {
	if base.Rate() > 0 {
		ratio = r.Rate() / base.Rate()
	}
	perRound := make([]float64, 0, len(r.rounds))
	for k, rate := range r.rounds {
		if k < len(base.rounds) && base.rounds[k] > 0 {
			perRound = append(perRound, rate/base.rounds[k])
		}
	}
	if len(perRound) > 0 {
		least, most = slices.Min(perRound), slices.Max(perRound)
	}
	return ratio, least, most
}

// Consume starts a run of v with n messages, waits for all of them and
// returns the time they took.
func (e *E2E) Consume(ctx context.Context, v E2EVariant, n int) (time.Duration, error) {
	run, err := e.Start(ctx, v, n)
	if err != nil {
		return 0, err
	}
	d, err := run.Wait(ctx)
	if cerr := run.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the router: %w", cerr)
	}
	return d, err
}
