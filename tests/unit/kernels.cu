// Kernels whose parameter layouts the cubin reader's tests know (tests/unit/test_cubin.cc): the
// Makefile compiles this file into fat binaries, plain and compressed. Never run.
struct Big {
  float v[41];
};
extern "C" __global__ void scale(float *a, const float *b, int n, double s) {
  if (int(threadIdx.x) < n) a[threadIdx.x] = b[threadIdx.x] * float(s);
}
template <class T>
__global__ void mixed(T *out, Big big, char c, short h, long long x) {
  out[threadIdx.x] = big.v[threadIdx.x % 41] + c + h + T(x);
}
template __global__ void mixed<float>(float *, Big, char, short, long long);
extern "C" __global__ void none() {}
