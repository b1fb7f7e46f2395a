// Module and library loads from memory: each passes through, and once the driver has accepted the
// image, the launch observer reads its kernels' parameter layouts (Note [Layouts from the cubin]
// in runtime/cubin.h). Loads from files are not read: cudart, cuBLAS and PyTorch load from memory.
#include "interpose/library.h"
#include "interpose/observer/kernel_layouts.h"
#include "interpose/symbols.h"

using vc::interpose::HookGroup;
using vc::interpose::HookScope;

namespace {

CUresult loaded(const HookScope &scope, CUresult r, const void *image) {
  if (r == CUDA_SUCCESS) {
    if (vc::Runtime *rt = scope.runtime()) vc::interpose::read_layouts(rt, image);
  }
  return r;
}

}  // namespace

VC_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  HookScope scope(HookGroup::kModule);
  VC_REAL_OR_FAIL(cuModuleLoadData, CUDA_ERROR_NOT_INITIALIZED);
  return loaded(scope, real(module, image), image);
}

VC_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *options,
                                      void **values) {
  HookScope scope(HookGroup::kModule);
  VC_REAL_OR_FAIL(cuModuleLoadDataEx, CUDA_ERROR_NOT_INITIALIZED);
  return loaded(scope, real(module, image, n, options, values), image);
}

VC_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fat_cubin) {
  HookScope scope(HookGroup::kModule);
  VC_REAL_OR_FAIL(cuModuleLoadFatBinary, CUDA_ERROR_NOT_INITIALIZED);
  return loaded(scope, real(module, fat_cubin), fat_cubin);
}

VC_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit_options,
                                     void **jit_values, unsigned int n_jit, CUlibraryOption *options, void **values,
                                     unsigned int n_options) {
  HookScope scope(HookGroup::kModule);
  VC_REAL_OR_FAIL(cuLibraryLoadData, CUDA_ERROR_NOT_INITIALIZED);
  return loaded(scope, real(library, code, jit_options, jit_values, n_jit, options, values, n_options), code);
}
