// The explicit backend (VRAMCACHE_BACKEND=explicit, the default): its device, the VmmDevice the
// frame mover (runtime/frames.h, Note [Frames]) runs on, made of the driver's VMM API, two copy
// streams and their events. The frame mover decides what moves where; this only carries it out,
// and a call that fails is logged with its error and reported to the mover as false.
#pragma once

#include <cstdint>
#include <memory>

#include "interpose/cuda_api.h"
#include "runtime/frames.h"

namespace vc::interpose {

struct ExplicitBackend {
  std::unique_ptr<VmmDevice> vmm;
  std::unique_ptr<FrameMover> mover;  // frames of VRAMCACHE_FRAME_SIZE, chunks up to the budget
  CUcontext context = nullptr;
  int device = 0;
};

// Needs a current context. Null (logged once) when the driver or the device cannot do it.
// `home_on_demand`: Note [Home mapped on demand] in runtime/frames.cc; `clean_check`: Note [Clean
// pieces] in runtime/frames_clean.cc.
ExplicitBackend *start_explicit(const DriverApi *api, uint64_t frame_size, uint64_t budget, bool home_on_demand,
                                bool clean_check);

}  // namespace vc::interpose
