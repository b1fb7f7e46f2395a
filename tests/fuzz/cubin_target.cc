// libFuzzer target: the code images a program loads, read for its kernels' parameter layouts
// (runtime/cubin.h): a fat binary, plain or zstd-compressed, or a bare ELF cubin, of exactly the
// bytes given. Whatever it reads must be a consistent layout and must go into the index.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "runtime/cubin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<vc::KernelLayout> layouts = vc::read_image_layouts(data, size);
  for (const vc::KernelLayout &k : layouts) {
    uint64_t end = 0;
    for (const vc::ParamSlot &p : k.slots) {
      if (p.offset < end || p.size == 0) {
        fprintf(stderr, "layout of %s: parameters overlap or are empty\n", k.name.c_str());
        abort();
      }
      end = uint64_t(p.offset) + p.size;
    }
  }
  vc::LayoutIndex index;
  index.add(layouts);
  index.add(layouts);  // the same image twice keeps every layout
  if (index.size() > layouts.size()) abort();
  return 0;
}
