// The explicit backend's piece hasher (piece_hasher.h; Note [Clean pieces] in runtime/frames_clean.cc).
#include "interpose/piece_hasher.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "interpose/cuda_check.h"
#include "runtime/log.h"

// The device image (interpose/piece_hash_image.S): nvcc's fat binary of interpose/piece_hash.cu,
// empty where the library was built without nvcc.
extern "C" const unsigned char vc_piece_hash_image[], vc_piece_hash_image_end[];

namespace vc::interpose {

bool PieceHasher::start(const DriverApi *api, const PieceKey &key, CUstream s) {
  api_ = api, key_ = key;
  // One line: why, and the driver call that failed with its error's name (Note [Checked calls]).
  // Called with mu_ not held (it takes it to give the pinned blocks back).
  auto off = [this](const char *why, const char *call = nullptr, CUresult result = CUDA_SUCCESS) {
    if (call)
      VC_WARN("the clean check is off: %s (%s failed: %s); evicted frames are copied home whole", why, call,
              cu_error_name(result));
    else VC_WARN("the clean check is off: %s; evicted frames are copied home whole", why);
    std::lock_guard lock(mu_);
    for (PieceHash *b : blocks_) api_->cuMemFreeHost(b);
    blocks_.clear(), free_.clear(), fn_ = nullptr;
    return false;
  };
  if (+vc_piece_hash_image_end == +vc_piece_hash_image)
    return off("this library holds no device code for it (it was built without nvcc)");
  if (!api->cuModuleLoadData || !api->cuModuleGetFunction || !api->cuLaunchKernel || !api->cuMemAllocHost ||
      !api->cuMemFreeHost || !api->cuStreamSynchronize || !api->cuEventQuery)
    return off("the driver lacks a function it needs");
  if (CUresult r = api->cuModuleLoadData(&module_, vc_piece_hash_image))
    return off("its device code did not load", "cuModuleLoadData", r);
  CUfunction fn = nullptr;
  if (CUresult r = api->cuModuleGetFunction(&fn, module_, "vc_piece_hash"))
    return off("its kernel was not found", "cuModuleGetFunction", r);
  CUresult grown = CUDA_SUCCESS;
  {
    std::lock_guard lock(mu_);  // released before off(), which takes it
    grown = grow();
  }
  if (grown != CUDA_SUCCESS) return off("pinned memory for its hashes could not be had", "cuMemAllocHost", grown);
  // The check: the hashes of data of its own, in pinned memory the kernel reads over the link, in
  // three pieces, the last one ending inside a 16-byte unit, against the host's. It also loads the
  // kernel now (lazy loading would at the first move).
  constexpr uint64_t kPiece = 64 << 10, kBytes = 2 * kPiece + 1000;
  void *buf = nullptr;
  if (CUresult r = api->cuMemAllocHost(&buf, kBytes))
    return off("pinned memory for its check could not be had", "cuMemAllocHost", r);
  uint8_t *data = static_cast<uint8_t *>(buf);
  std::mt19937_64 rng(key.k0 ^ 0x636c65616eULL);
  for (uint64_t i = 0; i < kBytes; ++i) data[i] = uint8_t(rng());
  PieceHash *out = slot(0);
  fn_ = fn;
  const char *call = "cuLaunchKernel";
  CUresult r = launch(s, uint64_t(data), kBytes, kPiece, out);
  if (r == CUDA_SUCCESS) r = api->cuStreamSynchronize(s), call = "cuStreamSynchronize";
  bool same = r == CUDA_SUCCESS;
  for (uint64_t i = 0; same && i < 3; ++i) same = out[i] == piece_hash(key, data + i * kPiece, std::min(kPiece, kBytes - i * kPiece));
  api->cuMemFreeHost(buf);
  if (r != CUDA_SUCCESS) return off("its check could not run on the device", call, r);
  if (!same) return off("its check failed: the device's hashes differ from the host's");
  VC_DEBUG("clean check: the device's piece hashes match the host's");
  return true;
}

CUresult PieceHasher::launch(CUstream s, uint64_t va, uint64_t bytes, uint64_t piece, PieceHash *out) {
  uint64_t b = bytes, p = piece, k0 = key_.k0, k1 = key_.k1;
  void *params[] = {&va, &b, &p, &k0, &k1, &out};
  const unsigned blocks = unsigned((bytes + piece - 1) / piece);
  return api_->cuLaunchKernel(fn_, blocks, 1, 1, kPieceThreads, 1, 1, 0, s, params, nullptr);
}

uint64_t PieceHasher::hash(CUstream s, uint64_t va, uint64_t bytes, uint64_t piece) {
  if (!fn_ || !piece || piece > kMaxPiece || piece % 16 || (bytes + piece - 1) / piece > kSlotPieces) return 0;
  std::lock_guard lock(mu_);
  harvest();
  if (free_.empty() && (blocks_.size() >= kMaxBlocks || !VC_CU_RESULT(grow(), "cuMemAllocHost"))) return 0;
  const uint32_t i = free_.back();
  auto event = [&] {
    CUevent e = nullptr;
    if (!spare_.empty()) e = spare_.back(), spare_.pop_back();
    else if (!api_->cuEventElapsedTime || !VC_CU(api_->cuEventCreate(&e, CU_EVENT_DEFAULT))) e = nullptr;
    return e;
  };
  Timed t{event(), event(), (bytes + piece - 1) / piece};
  auto recycle = [&] {
    for (CUevent e : {t.start, t.end})
      if (e) spare_.push_back(e);
  };
  // A failure here costs a hash (its piece is copied home as if changed) or a timing, never a byte:
  // each is logged where it failed (Note [Checked calls]).
  const bool timed = t.start && t.end && VC_CU(api_->cuEventRecord(t.start, s));
  if (!VC_CU_RESULT(launch(s, va, bytes, piece, slot(i)), "cuLaunchKernel")) return recycle(), 0;
  if (timed && VC_CU(api_->cuEventRecord(t.end, s))) timed_.push_back(t);
  else recycle();
  free_.pop_back();
  taken_[++next_token_] = i;
  return next_token_;
}

bool PieceHasher::read(uint64_t token, PieceHash *out, size_t n) {
  std::lock_guard lock(mu_);
  auto it = taken_.find(token);
  if (it == taken_.end()) return false;
  const bool ok = n <= kSlotPieces;
  if (ok) std::memcpy(out, slot(it->second), n * sizeof(PieceHash));
  free_.push_back(it->second);
  taken_.erase(it);
  return ok;
}

void PieceHasher::drop(uint64_t token) {
  std::lock_guard lock(mu_);
  auto it = taken_.find(token);
  if (it == taken_.end()) return;
  free_.push_back(it->second);
  taken_.erase(it);
}

void PieceHasher::time(uint64_t *pieces, uint64_t *ns) {
  std::lock_guard lock(mu_);
  *pieces = pieces_, *ns = ns_;
}

CUresult PieceHasher::grow() {
  void *p = nullptr;
  if (blocks_.size() >= kMaxBlocks) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult r = api_->cuMemAllocHost(&p, uint64_t(kSlotsPerBlock) * kSlotPieces * sizeof(PieceHash))) return r;
  blocks_.push_back(static_cast<PieceHash *>(p));
  for (uint32_t k = kSlotsPerBlock; k-- > 0;) free_.push_back(uint32_t(blocks_.size() - 1) * kSlotsPerBlock + k);
  return CUDA_SUCCESS;
}

void PieceHasher::harvest() {
  while (!timed_.empty()) {
    const Timed t = timed_.front();
    const CUresult r = api_->cuEventQuery(t.end);
    if (r == CUDA_ERROR_NOT_READY) return;
    float ms = 0;
    if (VC_CU_RESULT(r, "cuEventQuery") && VC_CU(api_->cuEventElapsedTime(&ms, t.start, t.end)) && ms > 0)
      pieces_ += t.pieces, ns_ += uint64_t(double(ms) * 1e6);
    spare_.push_back(t.start), spare_.push_back(t.end);
    timed_.pop_front();
  }
}

}  // namespace vc::interpose
