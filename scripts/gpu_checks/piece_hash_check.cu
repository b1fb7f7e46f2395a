// GPU check of vramcache's piece hash kernel (interpose/piece_hash.cu) against the host's definition
// (runtime/piece_hash.h, Note [Piece hash]): random data and keys, pieces of 2 MiB down to 16 KiB,
// ranges that end inside a piece and inside a 16-byte unit; the kernel compiled in here, and the
// library's own image (build/piece_hash.fatbin, or the path given) loaded and launched as the
// library does (cuModuleLoadData, cuLaunchKernel), and the same block with 256 and 512 threads. A
// byte changed on the device must change that piece's hash and no other. Exits 1 on any mismatch,
// 77 without a GPU; prints the rates (not asserted). Build: make samples
// (build/samples/piece_hash_check).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../interpose/piece_hash.cu"
#include "probe.h"

template <unsigned kThreads>
__global__ void __launch_bounds__(kThreads) variant(const unsigned char *base, uint64_t bytes, uint64_t piece,
                                                    uint64_t k0, uint64_t k1, vc::PieceHash *out) {
  piece_hash_block<kThreads>(base, bytes, piece, k0, k1, out);
}

namespace {

int mismatches = 0;

struct Image {  // the library's image, when found
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
};
Image image;
// The kernels: the library's compiled in, its image (if found), the block with 256 and 512 threads.
const char *const kKernels[] = {"compiled-in", "image", "256 threads", "512 threads"};

// Launches kernel `which` over [d, d + bytes) in pieces of `piece` (not synchronized).
void launch(int which, CUdeviceptr d, uint64_t bytes, uint64_t piece, const vc::PieceKey &k, vc::PieceHash *out) {
  const unsigned blocks = unsigned((bytes + piece - 1) / piece);
  const unsigned char *base = reinterpret_cast<const unsigned char *>(d);
  if (which == 1) {
    uint64_t b = bytes, p = piece, k0 = k.k0, k1 = k.k1;
    void *params[] = {&base, &b, &p, &k0, &k1, &out};
    CK(cuLaunchKernel(image.fn, blocks, 1, 1, vc::kPieceThreads, 1, 1, 0, nullptr, params, nullptr));
  } else if (which == 2) {
    variant<256><<<blocks, 256>>>(base, bytes, piece, k.k0, k.k1, out);
  } else if (which == 3) {
    variant<512><<<blocks, 512>>>(base, bytes, piece, k.k0, k.k1, out);
  } else {
    vc_piece_hash<<<blocks, vc::kPieceThreads>>>(base, bytes, piece, k.k0, k.k1, out);
  }
}

std::vector<vc::PieceHash> device_hashes(int which, CUdeviceptr d, uint64_t bytes, uint64_t piece, const vc::PieceKey &k,
                                         vc::PieceHash *out) {
  launch(which, d, bytes, piece, k, out);
  CK(cuCtxSynchronize());
  return std::vector<vc::PieceHash>(out, out + (bytes + piece - 1) / piece);
}

void compare(const char *what, const std::vector<vc::PieceHash> &got, const std::vector<uint8_t> &host,
             uint64_t bytes, uint64_t piece, const vc::PieceKey &k) {
  for (size_t i = 0; i < got.size(); ++i) {
    const uint64_t n = std::min(piece, bytes - i * piece);
    const vc::PieceHash want = vc::piece_hash(k, host.data() + i * piece, n);
    if (got[i] != want) {
      if (++mismatches <= 10)
        printf("MISMATCH %s: bytes %llu, piece %llu, piece %zu (%llu bytes): device %016llx%016llx, host %016llx%016llx\n",
               what, (unsigned long long)bytes, (unsigned long long)piece, i, (unsigned long long)n,
               (unsigned long long)got[i].hi, (unsigned long long)got[i].lo, (unsigned long long)want.hi,
               (unsigned long long)want.lo);
    }
  }
}

}  // namespace

int main(int argc, char **argv) {
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  CUdevice dev;
  probe_start(&dev);
  const std::string path = argc > 1 ? argv[1] : "build/piece_hash.fatbin";
  std::vector<char> bytes_of_image;
  if (FILE *f = fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) bytes_of_image.insert(bytes_of_image.end(), buf, buf + n);
    fclose(f);
    CK(cuModuleLoadData(&image.module, bytes_of_image.data()));
    CK(cuModuleGetFunction(&image.fn, image.module, "vc_piece_hash"));
  } else {
    printf("note: no image at %s: the compiled-in kernel only\n", path.c_str());
  }
  const uint64_t kMaxBytes = 128ull << 20;
  CUdeviceptr d;
  CK(cuMemAlloc(&d, kMaxBytes));
  vc::PieceHash *out = nullptr;
  CK(cuMemAllocHost(reinterpret_cast<void **>(&out), 4096 * sizeof(vc::PieceHash)));
  std::mt19937_64 rng(12345);
  struct Case {
    uint64_t bytes, piece;
  } cases[] = {{64ull << 20, 2ull << 20},          {(8ull << 20) + (1 << 20), 2ull << 20}, {(2ull << 20) - 16, 2ull << 20},
               {(4ull << 20) + 1000, 1ull << 20},  {(1ull << 20) + 7, 64 << 10},           {16 << 10, 16 << 10},
               {(3 << 14) + 5, 16 << 10},          {1, 16 << 10},                          {17, 2ull << 20}};
  size_t compared = 0;
  for (const Case &c : cases) {
    std::vector<uint8_t> host(c.bytes);
    for (auto &b : host) b = uint8_t(rng());
    const vc::PieceKey k{rng(), rng()};
    CK(cuMemcpyHtoD(d, host.data(), c.bytes));
    for (int which = 0; which < 4; ++which) {
      if (which == 1 && !image.fn) continue;
      const char *what = kKernels[which];
      auto got = device_hashes(which, d, c.bytes, c.piece, k, out);
      compare(what, got, host, c.bytes, c.piece, k);
      compared += got.size();
      // One byte changed on the device: its piece's hash changes, no other.
      const uint64_t at = rng() % c.bytes;
      uint8_t b = uint8_t(host[at] ^ 0x80);
      CK(cuMemcpyHtoD(d + at, &b, 1));
      auto after = device_hashes(which, d, c.bytes, c.piece, k, out);
      for (size_t i = 0; i < after.size(); ++i)
        if ((after[i] != got[i]) != (i == at / c.piece) && ++mismatches <= 10)
          printf("MISMATCH %s: a byte changed at %llu: piece %zu's hash %s\n", what, (unsigned long long)at, i,
                 after[i] != got[i] ? "changed" : "did not change");
      CK(cuMemcpyHtoD(d + at, &host[at], 1));
    }
  }
  // The rates, for the record: a frame of 2, 64 or 128 MiB in 2 MiB pieces (a block each), best of 5.
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  for (int which : {0, 2, 3})
    for (uint64_t frame : {2ull << 20, 64ull << 20, 128ull << 20}) {
      float best = 1e9;
      for (int rep = 0; rep < 5; ++rep) {
        CK(cuEventRecord(e0, nullptr));
        launch(which, d, frame, 2 << 20, vc::PieceKey{1, 2}, out);
        CK(cuEventRecord(e1, nullptr));
        CK(cuEventSynchronize(e1));
        float ms = 0;
        CK(cuEventElapsedTime(&ms, e0, e1));
        best = std::min(best, ms);
      }
      printf("piece hash, %s: a frame of %llu MiB in %.1f us (%.1f GB/s)\n", kKernels[which],
             (unsigned long long)(frame >> 20), best * 1e3, frame / (best * 1e-3) / 1e9);
    }
  printf("piece hash: %zu pieces compared with the host, %d mismatches%s\n", compared, mismatches,
         image.fn ? " (the library's kernel compiled in and its image, 256 and 512 threads)"
                  : " (the library's kernel compiled in, 256 and 512 threads; no image)");
  return mismatches ? 1 : 0;
}
