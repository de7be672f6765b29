// Host-side verification of speculative decoding: standard speculative sampling (Leviathan et
// al. 2023, Chen et al. 2023). A drafter proposes K tokens, each drawn from its distribution q
// with DrawToken; the target scores all K+1 positions; draft d at position j is accepted with
// probability min(1, p(d)/q(d)), and the first rejection is replaced by a draw from
// norm(max(0, p - q)); if all K are accepted, a bonus token is drawn from the last row's p. Each
// emitted token is then distributed as p, the distribution non-speculative sampling (DrawToken)
// draws from, whatever the drafter proposes.
//
// Exactness. p and q are DrawToken's own fixed-point masses (KeptMass in draw.h), so there is no
// second definition of the filters to drift. All arithmetic is on integers: with masses m <= 2^32
// and totals T <= 2^50, the acceptance test compares a 53-bit u with p(d)/q(d) =
// mp·Tq / (mq·Tp) exactly (operands < 2^83, __int128), so P(accept) is min(1, p/q) rounded up to
// a multiple of 2^-53; the residual masses mp·Tq - mq·Tp (< 2^83 each, < 2^101 in total) are
// drawn by an exact inverse CDF at floor(u·T_residual). Every probability is therefore the ideal
// one to within ~2^-52 per token, as DrawToken's own are, and the speculative output
// distribution equals non-speculative sampling's to that precision (tests/spec/
// speculative_test.cc compares the two on a toy model).
//
// Randomness is counter-based like the rest of sampling (sampling.h): keyed by the request seed
// and the absolute output index, in three salted streams (draft draw, acceptance test, target
// draw), so a round does not depend on batching and a recomputed request repeats itself. The
// target draw of output index i uses RowSeed(seed, i), the seed non-speculative sampling uses.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lib/sampling/draw.h"

namespace gannet::spec {

// The distribution DrawToken draws from for these logits and params: the kept ids (in id order)
// and their fixed-point masses (exactly DrawToken's), with their sum. Greedy params, and rows
// where nothing is kept (see KeptMass; DrawToken falls back to the arg-max): the arg-max alone
// (ties to the lowest id) with mass 1.
struct KeptMasses {
  std::vector<int32_t> ids;
  std::vector<uint64_t> mass;
  uint64_t total = 0;
  uint64_t MassOf(int32_t id) const;  // 0 if not kept
};
KeptMasses ComputeKeptMasses(const float* logits, int64_t vocab, const sampling::DrawParams& p);

// Seeds of one speculative round of a request seeded `request_seed` whose next output index is
// `num_output`: the draft draw of step k and the acceptance test of position j. Both are keyed by
// the absolute output index (num_output + k), like RowSeed. Reusing an index's draft seed in a
// later round is sound: a draft past the first rejection was discarded without influencing
// anything, so its seed is still fresh.
uint64_t DraftSeed(uint64_t request_seed, int64_t num_output, int k);
uint64_t AcceptSeed(uint64_t request_seed, int64_t num_output, int j);

struct VerifyOutcome {
  int accepted = 0;   // drafts[0, accepted) are kept
  int32_t next = -1;  // the token after them: the replacement of drafts[accepted], or the bonus
};

// Verifies one sequence's K = drafts.size() drafts against the target's K+1 logits rows.
//   target_rows, target_draws: K+1 (target_draws[j].seed = RowSeed(request_seed, num_output+j)).
//   draft_rows, draft_draws: the rows and params drafts[j] was drawn from (K each). draft_rows may
//     be empty when, at every position, the target params or the draft params are greedy (with
//     greedy draft params q is then the point mass at drafts[j], as a greedy drafter drew it).
//   accept_seeds: K (AcceptSeed(request_seed, num_output, j)).
// Greedy target params at position j (DrawParams::greedy()): accept iff drafts[j] is
// the row's arg-max, and the replacement is that arg-max; no randomness is used.
// A draft with q(d) == 0 (not drawable from q, or an id outside the vocabulary) is rejected. If
// the residual max(0, p - q) is then empty (only possible when p == q), the replacement is
// DrawToken(target_rows[j], target_draws[j]).
// Span sizes other than the above are a caller bug: GANNET_CHECK aborts.
VerifyOutcome VerifyDrafts(std::span<const float* const> target_rows, int64_t vocab,
                           std::span<const sampling::DrawParams> target_draws,
                           std::span<const float* const> draft_rows,
                           std::span<const sampling::DrawParams> draft_draws,
                           std::span<const int32_t> drafts, std::span<const uint64_t> accept_seeds);

}  // namespace gannet::spec
