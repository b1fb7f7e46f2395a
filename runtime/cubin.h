// Kernel parameter layouts read from the code images the program loads (Note [Layouts from the
// cubin]). No CUDA here: an image is bytes, as the driver accepted them.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "runtime/param_decode.h"

namespace vc {

// Note [Layouts from the cubin]
// The driver tells a kernel's parameters one at a time (cuFuncGetParamInfo) and has no count: a
// probe of each new kernel ends with one call that fails, which compute-sanitizer reports as an API
// error (7 in `bash scripts/memcheck.sh DIR`, memcheck of the CUDA C++ sample under the explicit
// backend). The cubin has them: its section .nv.info.<kernel> holds one EIATTR_KPARAM_INFO per
// parameter (ordinal, offset, size) and EIATTR_CBANK_PARAM_SIZE, their total. So the images the
// program loads (cuModuleLoadData, cuModuleLoadDataEx, cuModuleLoadFatBinary, cuLibraryLoadData)
// are read once the driver has accepted them: a fat binary's first ELF entry that can be read
// (zstd-compressed or not; PTX is skipped), or a bare ELF. A layout is kept only if its ordinals
// run 0..n-1 and its last parameter ends at the total; a name that two images give different
// layouts is dropped. The launch path still asks the driver for each of those parameters and uses
// the layout only if the driver agrees on every one (interpose/observer/kernel_layouts.cc): the
// image gives the count, never the layout alone. Otherwise, and for kernels not found, it probes
// the driver parameter by parameter. Formats, as checked against nvcc 13.0's output
// (tests/unit/test_cubin.cc): fat binary header {u32 magic 0xBA55ED50, u16 version, u16 header
// size, u64 size}; entry {u16 kind (1 PTX, 2 ELF), u16, u32 header size, u64 payload size, u32
// compressed size, ..., u64 flags at 40 (0x8000: compressed), u64 uncompressed size at 56};
// .nv.info attributes {u8 format, u8 attribute, then format 4: u16 length and a value; formats 2
// and 3: a u16 value; format 1: nothing}.
struct KernelLayout {
  std::string name;  // as the driver names it (mangled)
  std::vector<ParamSlot> slots;
};

// The layouts of every kernel in `image` (a fat binary, the wrapper cudart registers around one,
// or an ELF cubin). Empty if it is none of those or cannot be read. `image` must be an image the
// driver accepted: sizes are taken from its headers.
std::vector<KernelLayout> read_image_layouts(const void *image);
// The same for `size` bytes read from a file (a fat binary or an ELF; never the wrapper, whose
// pointer means nothing there): nothing past them is read, whatever the headers say.
std::vector<KernelLayout> read_image_layouts(const void *image, size_t size);

// What the program loaded, by kernel name. Thread-safe.
class LayoutIndex {
 public:
  void add(const std::vector<KernelLayout> &layouts);
  // The layout of `name`, if exactly one is known (copied out: entries may be dropped later).
  bool find(const std::string &name, std::vector<ParamSlot> *slots) const;
  size_t size() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::vector<ParamSlot>> layouts_;
  std::set<std::string> conflicted_;  // names two images gave different layouts
};

}  // namespace vc
