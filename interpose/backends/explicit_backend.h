// The explicit backend (VRAMCACHE_BACKEND=explicit, the default): its device, the VmmDevice the
// frame mover (runtime/frames.h, Note [Frames]) runs on, made of the driver's VMM API, two copy
// streams and their events. The frame mover decides what moves where; this only carries it out,
// and a call that fails is logged with its error and reported to the mover as false.
#pragma once

#include <cstdint>
#include <memory>

#include <string>

#include "interpose/cuda_api.h"
#include "runtime/disk/disk_io.h"
#include "runtime/disk/disk_store.h"
#include "runtime/frames.h"

namespace vc::interpose {

// Note [Frames on disk] in runtime/frames_disk.cc: VRAMCACHE_SWAP_DIR, VRAMCACHE_HOST_LIMIT (bytes
// of frame homes), VRAMCACHE_DISK_DEPTH, VRAMCACHE_DISK_PROBE.
struct DiskSetup {
  std::string dir;
  uint64_t host_limit = 0;
  int depth = 16;
  uint64_t probe_bytes = 0;
};

struct ExplicitBackend {
  // Declared first, so destroyed last: the mover is stopped before the store it spills to goes.
  std::unique_ptr<DiskIo> disk_io;
  std::unique_ptr<DiskStore> disk;  // null: no disk level
  std::unique_ptr<VmmDevice> vmm;
  std::unique_ptr<FrameMover> mover;  // frames of VRAMCACHE_FRAME_SIZE, chunks up to the budget
  CUcontext context = nullptr;
  int device = 0;
};

// Needs a current context. Null (logged once) when the driver or the device cannot do it.
// `home_on_demand`: Note [Home mapped on demand] in runtime/frames.cc; `clean_check`: Note [Clean
// pieces] in runtime/frames_clean.cc.
// `disk`: the disk level, if any (null: none).
ExplicitBackend *start_explicit(const DriverApi *api, uint64_t frame_size, uint64_t budget, bool home_on_demand,
                                bool clean_check, const DiskSetup *disk = nullptr);

}  // namespace vc::interpose
