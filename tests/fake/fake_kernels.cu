// The fake driver's kernels (tests/fake/fake.h) as nvcc lays them out: the interposition test
// loads this image through cuModuleLoadData, so their layouts come from the cubin (Note [Layouts
// from the cubin] in runtime/cubin.h) and the driver is asked for exactly their parameters. Built
// with -DWRONG_LAYOUT, fake_function's last parameter disagrees with the fake driver's.
#ifdef WRONG_LAYOUT
extern "C" __global__ void fake_function(void *, void *, long long) {}
#else
extern "C" __global__ void fake_function(void *, void *, int) {}
#endif
extern "C" __global__ void fake_add(void *, void *, int) {}
extern "C" __global__ void fake_kernel(int, void *) {}
