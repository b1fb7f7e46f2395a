// Kernel parameter layouts, per launched function handle: the offset and size of each parameter,
// asked of the driver once per handle and read from the images the program loads (Note [Layouts
// from the cubin] in runtime/cubin.h), and a launch's parameters assembled into one buffer laid out
// as the kernel sees it. A layout the driver does not confirm is "not decoded", never guessed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/param_decode.h"
#include "runtime/runtime.h"

namespace vc::interpose {

struct KernelInfo {
  bool decodable = false;
  std::vector<ParamSlot> slots;
  size_t buffer_size = 0;
  std::string name;
};

// The layout of function or kernel handle `handle` (Note [CUfunction or CUkernel]), asked of the
// driver the first time; never null. Entries are never freed: a launch or a graph may hold one.
const KernelInfo *kernel_info(uint64_t handle);
// A module or library is being unloaded: its handles may be reused for other kernels, whose
// parameters a kept layout would misread, so every handle is asked again.
void forget_kernel_layouts();

// Copies a launch's parameters into `buf`, laid out as `k` says. Handles both kernelParams (one
// pointer per parameter) and extra (CU_LAUNCH_PARAM_BUFFER_POINTER). False: not decoded.
bool assemble_params(const KernelInfo &k, void **kernel_params, void **extra, std::vector<uint8_t> *buf);

// A module or library the driver loaded from `image`: its kernels' parameter layouts are kept
// for the launches to come.
void read_layouts(Runtime *rt, const void *image);

}  // namespace vc::interpose
