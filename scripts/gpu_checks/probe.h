// What the driver-API probes (explicit_probe.cu, managed_probe.cu) share: CK, which ends the probe
// at a failed call with its line; a clock; and the start: a watchdog, then device 0's primary
// context made current.
#pragma once

#include <cuda.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                           \
  do {                                                                  \
    CUresult r_ = (x);                                                  \
    if (r_ != CUDA_SUCCESS) {                                           \
      const char *s_ = nullptr;                                         \
      cuGetErrorString(r_, &s_);                                        \
      printf("FAILED %s: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); \
      exit(2);                                                          \
    }                                                                   \
  } while (0)

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Past 60 s the probe says it hung and exits with 3. Returns the context; `dev`: device 0.
static CUcontext probe_start(CUdevice *dev) {
  signal(SIGALRM, [](int) {
    printf("HANG: the probe did not finish in 60 s\n");
    fflush(stdout);
    _exit(3);
  });
  alarm(60);
  CK(cuInit(0));
  CK(cuDeviceGet(dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, *dev));
  CK(cuCtxSetCurrent(ctx));
  return ctx;
}
