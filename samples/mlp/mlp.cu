// mlp: a small CUDA C++ trainer (2-layer MLP, Adam) that reaches the GPU through every path
// vramcache hooks: cudaMalloc, cuMemAlloc, cudaMallocAsync, managed memory, cuBLAS GEMMs and its
// own kernels launched with cuLaunchKernel / cuLaunchKernelEx. It is deterministic: no float
// atomics, fixed-order reductions, one stream. It must stay small: its managed buffer is tiny.
// Build (the top Makefile's command; exit 77 at run time means "no GPU, skip"):
//   nvcc -O2 -std=c++17 -gencode arch=compute_90,code=[sm_90,compute_90] -cudart shared samples/mlp/mlp.cu -o build/samples/mlp -lcublas -lcuda

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <vector>

namespace {

constexpr int kIn = 512;       // input features
constexpr int kHidden = 1024;  // hidden units
constexpr int kOut = 256;      // outputs
constexpr int kBatch = 256;    // samples per step
constexpr int kBatches = 8;    // the data set: kBatches batches, used in turn
constexpr int kChunks = 2;     // layer 1 forward runs as kChunks column blocks of one batched GEMM
constexpr int kBlock = 256;    // threads per block of every kernel (the reductions assume it)
constexpr int kLossBlocks = 128;
constexpr int kMaxSteps = 100000;  // keeps the managed loss buffer under 400 KB
constexpr float kLr = 1e-3f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;

void fail_cuda(cudaError_t e, const char* what, const char* file, int line) {
  fprintf(stderr, "mlp: %s:%d: %s failed: %s (%s)\n", file, line, what, cudaGetErrorName(e),
          cudaGetErrorString(e));
  exit(1);
}

void fail_cu(CUresult e, const char* what, const char* file, int line) {
  const char* name = nullptr;
  if (cuGetErrorName(e, &name) != CUDA_SUCCESS) name = "unknown CUresult";
  fprintf(stderr, "mlp: %s:%d: %s failed: %s (%d)\n", file, line, what, name, (int)e);
  exit(1);
}

void fail_cublas(cublasStatus_t e, const char* what, const char* file, int line) {
  fprintf(stderr, "mlp: %s:%d: %s failed: %s\n", file, line, what, cublasGetStatusName(e));
  exit(1);
}

#define CUDA_CHECK(call)                                                   \
  do {                                                                     \
    cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) fail_cuda(e_, #call, __FILE__, __LINE__);       \
  } while (0)
#define CU_CHECK(call)                                                     \
  do {                                                                     \
    CUresult e_ = (call);                                                  \
    if (e_ != CUDA_SUCCESS) fail_cu(e_, #call, __FILE__, __LINE__);        \
  } while (0)
#define CUBLAS_CHECK(call)                                                 \
  do {                                                                     \
    cublasStatus_t e_ = (call);                                            \
    if (e_ != CUBLAS_STATUS_SUCCESS) fail_cublas(e_, #call, __FILE__, __LINE__); \
  } while (0)

}  // namespace

// ---- Kernels. Matrices are column-major (cuBLAS's layout): element (r, c) is at r + c * rows.
// extern "C" keeps their names plain for anyone reading a trace.

// Sum of one value per thread over a block of kBlock threads, in a fixed order.
__device__ float block_sum(float v) {
  __shared__ float sums[kBlock];
  sums[threadIdx.x] = v;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  return sums[0];
}

extern "C" __global__ void bias_relu(float* h, const float* b, int rows, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) h[i] = fmaxf(h[i] + b[i % rows], 0.0f);
}

// dy = d(mean squared error)/dy for y + b against t; partial[block] = that block's sum of squares.
extern "C" __global__ void mse_grad(const float* y, const float* b, const float* t, float* dy,
                                    float* partial, int rows, int cols) {
  int n = rows * cols;
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float d = y[i] + b[i % rows] - t[i];
    dy[i] = 2.0f * d / n;
    acc += d * d;
  }
  float total = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// One block: *out = (sum of partial[0..n)) * scale.
extern "C" __global__ void reduce_loss(const float* partial, int n, float scale, float* out) {
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += partial[i];
  float total = block_sum(acc);
  if (threadIdx.x == 0) *out = total * scale;
}

extern "C" __global__ void relu_backward(float* g, const float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && a[i] <= 0.0f) g[i] = 0.0f;
}

// out[r] = sum over columns of m(r, c), summed in column order (the bias gradient).
extern "C" __global__ void row_sum(const float* m, float* out, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int c = 0; c < cols; ++c) acc += m[r + c * rows];
  out[r] = acc;
}

// Adam; c1 and c2 are the bias corrections 1 / (1 - beta^t).
extern "C" __global__ void adam(float* w, const float* g, float* m, float* v, int n, float lr,
                                float beta1, float beta2, float eps, float c1, float c2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
  v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
  w[i] -= lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
}

namespace {

// Every device allocation and free this program makes itself, so a test can compare them with
// what vramcache saw (cuBLAS's and the runtime's own allocations are not in here).
struct Counts {
  int cuda_malloc = 0, cu_mem_alloc = 0, malloc_async = 0, managed = 0, frees = 0;
  int total() const { return cuda_malloc + cu_mem_alloc + malloc_async + managed; }
};
Counts g_counts;

float* alloc_runtime(int n) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, sizeof(float) * n));
  ++g_counts.cuda_malloc;
  return static_cast<float*>(p);
}

float* alloc_driver(int n) {
  CUdeviceptr p = 0;
  CU_CHECK(cuMemAlloc(&p, sizeof(float) * n));
  ++g_counts.cu_mem_alloc;
  return reinterpret_cast<float*>(static_cast<uintptr_t>(p));
}

float* alloc_async(int n, cudaStream_t s) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocAsync(&p, sizeof(float) * n, s));
  ++g_counts.malloc_async;
  return static_cast<float*>(p);
}

float* alloc_managed(int n) {
  CUdeviceptr p = 0;
  CU_CHECK(cuMemAllocManaged(&p, sizeof(float) * n, CU_MEM_ATTACH_GLOBAL));
  ++g_counts.managed;
  return reinterpret_cast<float*>(static_cast<uintptr_t>(p));
}

void free_runtime(float* p) {
  CUDA_CHECK(cudaFree(p));
  ++g_counts.frees;
}

// Also frees cuMemAllocManaged memory.
void free_driver(float* p) {
  CU_CHECK(cuMemFree(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p))));
  ++g_counts.frees;
}

void free_async(float* p, cudaStream_t s) {
  CUDA_CHECK(cudaFreeAsync(p, s));
  ++g_counts.frees;
}

// splitmix64: fixed output on every platform (std:: distributions are implementation-defined).
struct Rng {
  uint64_t state;
  float uniform() {  // in [-1, 1)
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / static_cast<float>(1 << 23) - 1.0f;
  }
};

unsigned blocks_for(int n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

// cuLaunchKernel with one pointer per argument; each argument must have the size of the kernel's
// parameter (float* for const float* is fine, int for int: no literal of another type).
template <typename... Args>
CUresult launch(CUfunction f, unsigned grid, CUstream s, Args... args) {
  void* params[] = {&args...};
  return cuLaunchKernel(f, grid, 1, 1, kBlock, 1, 1, 0, s, params, nullptr);
}

CUfunction function_of(const void* kernel) {
  cudaFunction_t f = nullptr;
  CUDA_CHECK(cudaGetFuncBySymbol(&f, kernel));
  return reinterpret_cast<CUfunction>(f);
}

struct Param {
  float *w, *g, *m, *v;  // weights, gradient, Adam moments
  int n;
};

Param make_param(int n, float scale, Rng& rng, cudaStream_t s) {
  Param p{alloc_runtime(n), alloc_driver(n), alloc_runtime(n), alloc_runtime(n), n};
  std::vector<float> host(n);
  for (float& x : host) x = scale * rng.uniform();
  CUDA_CHECK(cudaMemcpy(p.w, host.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemsetAsync(p.m, 0, sizeof(float) * n, s));
  CUDA_CHECK(cudaMemsetAsync(p.v, 0, sizeof(float) * n, s));
  return p;
}

void free_param(const Param& p) {
  free_runtime(p.w);
  free_driver(p.g);
  free_runtime(p.m);
  free_runtime(p.v);
}

// --access-log FILE: one JSON line per cuBLAS call or kernel launch, with the host clock
// (CLOCK_MONOTONIC_RAW, as vramcache's trace) around the call and every buffer it touches with
// its exact extent. The program knows its own accesses: ground truth for vramcache's access sets
// (scripts/validate_access.py).
struct Span {
  const void* ptr;
  size_t count;  // floats
  const char* dir;  // "in", "out" or "inout"
};
struct AccessLog {
  FILE* f = nullptr;
  static uint64_t now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  // Runs call() and logs it with its spans.
  template <typename Call>
  void record(const char* name, std::initializer_list<Span> spans, Call call) {
    uint64_t t0 = f ? now() : 0;
    call();
    if (!f) return;
    uint64_t t1 = now();
    fprintf(f, "{\"t0\":%llu,\"t1\":%llu,\"op\":\"%s\",\"t\":[", static_cast<unsigned long long>(t0),
            static_cast<unsigned long long>(t1), name);
    const char* sep = "";
    for (const Span& s : spans) {
      fprintf(f, "%s[%llu,%llu,\"%s\"]", sep, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(s.ptr)),
              static_cast<unsigned long long>(s.count * sizeof(float)), s.dir);
      sep = ",";
    }
    fprintf(f, "]}\n");
  }
};

int usage() {
  fprintf(stderr, "usage: mlp [--steps N] [--deterministic] [--access-log FILE]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20;
  AccessLog log;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = atoi(argv[++i]);
      if (steps < 1 || steps > kMaxSteps) return usage();
    } else if (strcmp(argv[i], "--access-log") == 0 && i + 1 < argc) {
      log.f = fopen(argv[++i], "w");
      if (!log.f) {
        fprintf(stderr, "mlp: cannot write %s\n", argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--deterministic") != 0) {  // always deterministic; accepted
      return usage();
    }
  }

  // Skip (77) where there is no usable GPU, so test runners can tell it from a failure.
  int devices = 0;
  cudaError_t rt = cudaGetDeviceCount(&devices);
  if (rt != cudaSuccess || devices == 0) {
    printf("mlp: no CUDA device (%s), skipping\n", rt != cudaSuccess ? cudaGetErrorName(rt) : "0 devices");
    return 77;
  }
  CUresult drv = cuInit(0);
  if (drv != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (cuGetErrorName(drv, &name) != CUDA_SUCCESS) name = "unknown CUresult";
    printf("mlp: cuInit failed (%s), skipping\n", name);
    return 77;
  }
  // Since CUDA 12, cudaSetDevice makes the primary context current, which the driver calls below
  // (cuMemAlloc, cuLaunchKernel) need.
  CUDA_CHECK(cudaSetDevice(0));
  CUcontext ctx = nullptr;
  CU_CHECK(cuCtxGetCurrent(&ctx));
  if (ctx == nullptr) {
    fprintf(stderr, "mlp: no current context after cudaSetDevice\n");
    return 1;
  }

  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));  // CUstream and cudaStream_t are the same type
  cublasHandle_t blas = nullptr;
  CUBLAS_CHECK(cublasCreate(&blas));
  CUBLAS_CHECK(cublasSetStream(blas, stream));

  CUfunction f_bias_relu = function_of((const void*)bias_relu);
  CUfunction f_mse_grad = function_of((const void*)mse_grad);
  CUfunction f_reduce_loss = function_of((const void*)reduce_loss);
  CUfunction f_relu_backward = function_of((const void*)relu_backward);
  CUfunction f_row_sum = function_of((const void*)row_sum);
  CUfunction f_adam = function_of((const void*)adam);

  // Data set: x uniform in [-1, 1), target |x| - 0.5 on the first kOut features (a ReLU net can
  // learn it, so the loss falls).
  Rng rng{42};
  std::vector<float> host_x(static_cast<size_t>(kBatches) * kBatch * kIn);
  std::vector<float> host_t(static_cast<size_t>(kBatches) * kBatch * kOut);
  for (float& x : host_x) x = rng.uniform();
  for (size_t sample = 0; sample < static_cast<size_t>(kBatches) * kBatch; ++sample)
    for (int o = 0; o < kOut; ++o)
      host_t[sample * kOut + o] = std::fabs(host_x[sample * kIn + o]) - 0.5f;
  float* data_x = alloc_runtime(kBatches * kBatch * kIn);
  float* data_t = alloc_runtime(kBatches * kBatch * kOut);
  CUDA_CHECK(cudaMemcpy(data_x, host_x.data(), sizeof(float) * host_x.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(data_t, host_t.data(), sizeof(float) * host_t.size(), cudaMemcpyHostToDevice));

  Param w1 = make_param(kHidden * kIn, 1.0f / std::sqrt(static_cast<float>(kIn)), rng, stream);
  Param b1 = make_param(kHidden, 0.0f, rng, stream);
  Param w2 = make_param(kOut * kHidden, 1.0f / std::sqrt(static_cast<float>(kHidden)), rng, stream);
  Param b2 = make_param(kOut, 0.0f, rng, stream);
  Param* params[] = {&w1, &b1, &w2, &b2};

  float* act_h = alloc_driver(kHidden * kBatch);   // hidden activations, after ReLU
  float* act_y = alloc_driver(kOut * kBatch);      // outputs before the bias
  float* grad_h = alloc_driver(kHidden * kBatch);  // gradient w.r.t. the hidden layer
  float* losses = alloc_managed(steps);            // written by the GPU, read by the host

  const float one = 1.0f, zero = 0.0f;
  const int chunk = kBatch / kChunks;
  std::vector<float> step_loss(steps);
  for (int step = 0; step < steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    const float* x = data_x + static_cast<size_t>(step % kBatches) * kBatch * kIn;
    const float* t = data_t + static_cast<size_t>(step % kBatches) * kBatch * kOut;
    float* grad_y = alloc_async(kOut * kBatch, stream);  // per-step temporaries
    float* partial = alloc_async(kLossBlocks, stream);

    // Forward. Layer 1 as one batched GEMM over column blocks of the batch (stride 0 on W1).
    const int hb = kHidden * kBatch, ob = kOut * kBatch;
    log.record("sgemm_strided_batched", {{w1.w, size_t(kHidden) * kIn, "in"}, {x, size_t(kIn) * kBatch, "in"}, {act_h, size_t(hb), "out"}}, [&] {
      CUBLAS_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, kHidden, chunk, kIn, &one,
                                             w1.w, kHidden, 0, x, kIn, static_cast<long long>(kIn) * chunk,
                                             &zero, act_h, kHidden, static_cast<long long>(kHidden) * chunk,
                                             kChunks));
    });
    log.record("bias_relu", {{act_h, size_t(hb), "inout"}, {b1.w, size_t(kHidden), "in"}}, [&] {
      CU_CHECK(launch(f_bias_relu, blocks_for(kHidden * kBatch), stream, act_h, b1.w, kHidden, kBatch));
    });
    log.record("gemm_ex", {{w2.w, size_t(kOut) * kHidden, "in"}, {act_h, size_t(hb), "in"}, {act_y, size_t(ob), "out"}}, [&] {
      CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, kOut, kBatch, kHidden, &one, w2.w,
                                CUDA_R_32F, kOut, act_h, CUDA_R_32F, kHidden, &zero, act_y, CUDA_R_32F,
                                kOut, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    log.record("mse_grad", {{act_y, size_t(ob), "in"}, {b2.w, size_t(kOut), "in"}, {t, size_t(ob), "in"},
                            {grad_y, size_t(ob), "out"}, {partial, size_t(kLossBlocks), "out"}}, [&] {
      CU_CHECK(launch(f_mse_grad, kLossBlocks, stream, act_y, b2.w, t, grad_y, partial, kOut, kBatch));
    });
    log.record("reduce_loss", {{partial, size_t(kLossBlocks), "in"}, {losses + step, 1, "out"}}, [&] {
      CU_CHECK(launch(f_reduce_loss, 1, stream, partial, kLossBlocks, 1.0f / (kOut * kBatch), losses + step));
    });

    // Backward.
    log.record("sgemm_w2", {{grad_y, size_t(ob), "in"}, {act_h, size_t(hb), "in"}, {w2.g, size_t(kOut) * kHidden, "out"}}, [&] {
      CUBLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, kOut, kHidden, kBatch, &one, grad_y, kOut,
                               act_h, kHidden, &zero, w2.g, kOut));
    });
    log.record("row_sum_b2", {{grad_y, size_t(ob), "in"}, {b2.g, size_t(kOut), "out"}}, [&] {
      CU_CHECK(launch(f_row_sum, blocks_for(kOut), stream, grad_y, b2.g, kOut, kBatch));
    });
    log.record("sgemm_h", {{w2.w, size_t(kOut) * kHidden, "in"}, {grad_y, size_t(ob), "in"}, {grad_h, size_t(hb), "out"}}, [&] {
      CUBLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, kHidden, kBatch, kOut, &one, w2.w, kOut,
                               grad_y, kOut, &zero, grad_h, kHidden));
    });
    log.record("relu_backward", {{grad_h, size_t(hb), "inout"}, {act_h, size_t(hb), "in"}}, [&] {
      CU_CHECK(launch(f_relu_backward, blocks_for(kHidden * kBatch), stream, grad_h, act_h, kHidden * kBatch));
    });
    log.record("sgemm_w1", {{grad_h, size_t(hb), "in"}, {x, size_t(kIn) * kBatch, "in"}, {w1.g, size_t(kHidden) * kIn, "out"}}, [&] {
      CUBLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, kHidden, kIn, kBatch, &one, grad_h, kHidden,
                               x, kIn, &zero, w1.g, kHidden));
    });
    log.record("row_sum_b1", {{grad_h, size_t(hb), "in"}, {b1.g, size_t(kHidden), "out"}}, [&] {
      CU_CHECK(launch(f_row_sum, blocks_for(kHidden), stream, grad_h, b1.g, kHidden, kBatch));
    });
    free_async(grad_y, stream);
    free_async(partial, stream);

    // Adam, launched through cuLaunchKernelEx so that entry point is exercised too.
    float c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(kBeta1), step + 1)));
    float c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(kBeta2), step + 1)));
    for (Param* p : params) {
      CUlaunchConfig config = {};
      config.gridDimX = blocks_for(p->n);
      config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = kBlock;
      config.blockDimY = config.blockDimZ = 1;
      config.hStream = stream;
      float lr = kLr, beta1 = kBeta1, beta2 = kBeta2, eps = kEps;
      void* args[] = {&p->w, &p->g, &p->m, &p->v, &p->n, &lr, &beta1, &beta2, &eps, &c1, &c2};
      size_t n = static_cast<size_t>(p->n);
      log.record("adam", {{p->w, n, "inout"}, {p->g, n, "in"}, {p->m, n, "inout"}, {p->v, n, "inout"}}, [&] {
        CU_CHECK(cuLaunchKernelEx(&config, f_adam, args, nullptr));
      });
    }

    CUDA_CHECK(cudaStreamSynchronize(stream));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    step_loss[step] = losses[step];
    printf("step %d loss %a time %.6f\n", step, static_cast<double>(step_loss[step]), seconds);
    fflush(stdout);
  }

  for (const Param* p : params) free_param(*p);
  free_runtime(data_x);
  free_runtime(data_t);
  free_driver(act_h);
  free_driver(act_y);
  free_driver(grad_h);
  free_driver(losses);
  CUBLAS_CHECK(cublasDestroy(blas));
  if (log.f) fclose(log.f);
  CUDA_CHECK(cudaStreamDestroy(stream));

  printf("allocs made %d cudaMalloc %d cuMemAlloc %d cudaMallocAsync %d managed %d\n", g_counts.total(),
         g_counts.cuda_malloc, g_counts.cu_mem_alloc, g_counts.malloc_async, g_counts.managed);
  printf("frees made %d\n", g_counts.frees);

  for (float l : step_loss) {
    if (!std::isfinite(l)) {
      printf("result fail: a loss is not finite\n");
      return 1;
    }
  }
  if (steps > 1 && !(step_loss.back() < step_loss.front())) {
    printf("result fail: the loss did not fall\n");
    return 1;
  }
  if (g_counts.frees != g_counts.total()) {
    printf("result fail: %d allocations but %d frees\n", g_counts.total(), g_counts.frees);
    return 1;
  }
  printf("result ok\n");
  return 0;
}
