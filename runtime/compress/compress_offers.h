// What the runtime tells the compressing mover (compress_mover.h) as the program runs, with
// VRAMCACHE_COMPRESS_RANK set: the output of each recognized GEMM whose shape qualifies
// (candidates.h) is offered once its kernels are enqueued, an op that writes a range ends the offers
// of it (one that may, its role unknown, has them checked by hash), and a free drops offers and
// factors. It owns the compressor and the mover in front
// of the backend's; it decides nothing of what moves (the pager does). No CUDA here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compress/compress_mover.h"
#include "runtime/gemm.h"
#include "runtime/trace.h"

namespace vc {

class CompressOffers {
 public:
  // `inner`: the backend's mover (its unit the pager's page); `dev`: outlives this; `reserve`:
  // device bytes of the budget kept for one factorization's factors and scratch.
  CompressOffers(Mover *inner, CompressDevice *dev, int64_t rank_setting, uint64_t reserve);
  // The device bytes a budget keeps for factors and scratch until a plan is learned: a sixteenth of
  // it, in whole units (Note [The reserve learned]).
  static uint64_t reserve_for(uint64_t budget, uint64_t unit);

  Mover *mover() { return &mover_; }  // the pager's mover
  const CompressMover &compress_mover() const { return mover_; }

  // The pager learned a plan from `trace`: its op `first_op` is position 0, `period` ops long
  // (Pager::learned_window). Each GEMM output of that iteration gets the span to its last read
  // before it is written or freed (Note [Offers read for the last time]), and the reserve becomes
  // what the largest candidate among them needs (Note [The reserve learned]); period 0 forgets the
  // spans and keeps the reserve.
  void learn(const Trace &trace, uint64_t first_op, uint64_t period);

  // A paged allocation, by id (the pager's refs name allocations by id) and its end.
  void on_alloc(uint64_t id, uint64_t base, uint64_t size);
  void on_free(uint64_t id, uint64_t base, uint64_t size);
  // Before an op on `stream` is given to the pager: every range it writes (a ref of known role)
  // ends its offers, a ref of unknown role has them hashed first (Note [Offers past ops of unknown
  // role]; `may_issue` false, a capture open: it ends them too); `wildcard`: it may touch anything,
  // so every offer ends (the summary names the wildcards that ended most, by `name`). `at`: the
  // op's plan position (Pager::position; kNever: not known).
  void before_op(const std::vector<Ref> &refs, bool wildcard, uint64_t stream, bool may_issue, const char *name,
                 uint64_t at);
  // After an op of a BLAS call on `stream` was given to the pager: its written operand is offered
  // if it qualifies (the summary's row is named `api` and its shape). `at`: that op's plan
  // position (kNever: not known).
  void after_gemm_op(const GemmOperand *ops, int n, const char *api, uint64_t stream, uint64_t at);

  uint64_t offered() const { return offered_; }  // offers made (a multi-kernel call's once per kernel)
  // The summary's lines: a header (offers, bytes of pages left without a copy, offers kept past
  // ops of unknown role and offers ended by reason), then
  // Compressor::summary_text's, one per GEMM shape factored or moved whole.
  std::string summary_text() const;

 private:
  std::mutex mu_;  // the program's threads offer and withdraw; the pager calls the mover under its own lock
  Compressor comp_;
  CompressMover mover_;
  CompressPolicy policy_;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> allocs_;  // id -> (base, size)
  std::map<uint64_t, uint64_t> bases_;                        // base -> size
  // Note [Offers read for the last time]: (position in the period, offset in its allocation) of a
  // GEMM's output -> positions from the GEMM to its last read.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> spans_;
  uint64_t period_ = 0;
  uint64_t offered_ = 0;
  std::map<std::string, uint64_t> opaque_;  // offers ended by wildcards of each name (kOpaqueNames of them)
  static constexpr size_t kOpaqueNames = 64;
};

}  // namespace vc
