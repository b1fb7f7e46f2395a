// A libcupti.so.13 with none of CUPTI's functions, found first on the library path: vramcache must
// then observe launches through its own wrappers of the driver's functions, as where PyTorch's CUPTI
// is not on the loader's path (tests/interpose/run.sh, "CUPTI not found").
extern "C" __attribute__((visibility("default"))) int fake_nocupti() { return 1; }
