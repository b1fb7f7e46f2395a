# vramcache build. `make` builds the library and the command; `make test` runs every test that
# needs no GPU; `make check` adds the layering check and a sanitizer build of the unit tests.
# Builds are incremental (dependency files); the runtime core is compiled WITHOUT the CUDA include
# path, so a CUDA header in runtime/ fails the build, not only the check.

CUDA      ?= /usr/local/cuda
CXX       ?= g++
NVCC      ?= $(CUDA)/bin/nvcc
BUILD     ?= build
CUDA_INC  := -I$(CUDA)/include $(if $(wildcard $(CUDA)/extras/CUPTI/include),-I$(CUDA)/extras/CUPTI/include)
WARN      := -Wall -Wextra -Werror
CXXFLAGS  ?= -O2 -g
# The tests' own code: macro-heavy, compiled for speed of the build (line tables still there for
# their failures); what they test is built with CXXFLAGS. Later -O/-g flags win over CXXFLAGS'.
TESTOPT   ?= -O1 -g1
BASEFLAGS := -std=c++17 -fPIC -fvisibility=hidden $(WARN) -I. -MMD -MP

RUNTIME_SRC   := $(shell find runtime -name '*.cc')
INTERPOSE_SRC := $(shell find interpose -name '*.cc')
PROFILER_SRC  := $(filter-out profiler/main.cc,$(shell find profiler -name '*.cc'))
UNIT_SRC      := $(shell find tests/unit -name '*.cc')
RUNTIME_OBJ   := $(RUNTIME_SRC:%.cc=$(BUILD)/obj/%.o)
INTERPOSE_OBJ := $(INTERPOSE_SRC:%.cc=$(BUILD)/obj/%.o)
PROFILER_OBJ  := $(PROFILER_SRC:%.cc=$(BUILD)/obj/%.o)
UNIT_OBJ      := $(UNIT_SRC:%.cc=$(BUILD)/obj/%.o)
FAKE_LIBS     := $(addprefix $(BUILD)/fake/,libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13 libnccl.so.2 libfaketool.so) \
                 $(BUILD)/fake-nocupti/libcupti.so.13

LIB := $(BUILD)/libvramcache.so
CLI := $(BUILD)/vramcache

.PHONY: all test check samples layering asan-test tsan-test soak-test clean install FORCE
all: $(LIB) $(CLI)

# `vramcache --version` names the commit it was built from (unknown outside git); the header is
# rewritten only when the commit changes, so the command is not relinked on every make.
COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(BUILD)/commit.h: FORCE
	@mkdir -p $(@D)
	@echo '#define VC_COMMIT "$(COMMIT)"' > $@.tmp; cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(BUILD)/obj/profiler/main.o: $(BUILD)/commit.h
$(BUILD)/obj/profiler/main.o: BASEFLAGS += -include $(BUILD)/commit.h

# `make install PREFIX=DIR`: the command in DIR/bin, the library in DIR/lib, where the command looks
# for it (../lib beside its own folder).
PREFIX ?= /usr/local
install: $(LIB) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/vramcache
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libvramcache.so

$(BUILD)/obj/runtime/%.o: runtime/%.cc
	@mkdir -p $(@D)
	$(CXX) $(BASEFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/obj/interpose/%.o: interpose/%.cc
	@mkdir -p $(@D)
	$(CXX) $(BASEFLAGS) $(CXXFLAGS) $(CUDA_INC) -c $< -o $@

$(BUILD)/obj/profiler/%.o: profiler/%.cc
	@mkdir -p $(@D)
	$(CXX) $(BASEFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.cc
	@mkdir -p $(@D)
	$(CXX) $(BASEFLAGS) $(CXXFLAGS) $(TESTOPT) $(CUDA_INC) -c $< -o $@
# (the interposition test's program checks tens of MB byte by byte, many times over: built as the library is)
$(BUILD)/obj/tests/interpose/%.o: TESTOPT :=

# vramcache's own device code: the piece hash kernel (interpose/piece_hash.cu) as a fat binary for
# the architectures the explicit backend runs on, with PTX for newer ones, embedded in the library
# (interpose/piece_hash_image.S). Built without a GPU; without nvcc the image is empty, the library
# still builds, and its clean check says it is off.
DEVICE_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code='[sm_90,compute_90]' \
               -gencode arch=compute_100,code=sm_100 -gencode arch=compute_120,code=sm_120
IMAGE_OBJ   := $(BUILD)/obj/interpose/piece_hash_image.o
$(BUILD)/piece_hash.fatbin: interpose/piece_hash.cu runtime/piece_hash.h
	@mkdir -p $(@D)
	$(if $(wildcard $(NVCC)),$(NVCC) -std=c++17 -O3 -I. -fatbin $(DEVICE_ARCH) $< -o $@,: > $@)
$(IMAGE_OBJ): interpose/piece_hash_image.S $(BUILD)/piece_hash.fatbin
	@mkdir -p $(@D)
	$(CXX) -c -Wa,-I$(BUILD) $< -o $@

# vramcache's own device code: lowrank_kernels.cu as a fat binary (sm_90 code, compute_90 PTX),
# embedded in the library by lowrank_image.S and loaded with cuModuleLoadData. nvcc needs no GPU.
LOWRANK_FATBIN := $(BUILD)/obj/interpose/compress/lowrank_kernels.fatbin
LOWRANK_IMAGE  := $(BUILD)/obj/interpose/compress/lowrank_image.o
$(LOWRANK_FATBIN): interpose/compress/lowrank_kernels.cu interpose/compress/lowrank_args.h runtime/compress/lowrank_common.h
	@mkdir -p $(@D)
	$(NVCC) -fatbin -O3 -std=c++17 -I. -Werror all-warnings -gencode arch=compute_90,code=[sm_90,compute_90] $< -o $@
$(LOWRANK_IMAGE): interpose/compress/lowrank_image.S $(LOWRANK_FATBIN)
	@mkdir -p $(@D)
	$(CXX) -c -DVC_LOWRANK_FATBIN='"$(LOWRANK_FATBIN)"' $< -o $@

# The library carries its own C++ runtime (hidden by the version script), so it never clashes with
# the application's libstdc++ (CXXRT; ThreadSanitizer's build links the shared one, whose guard
# variables of static locals it intercepts). CUPTI is opened at run time from the RUNPATH or the
# loader's path.
CXXRT ?= -static-libstdc++ -static-libgcc
$(LIB): $(RUNTIME_OBJ) $(INTERPOSE_OBJ) $(IMAGE_OBJ) $(LOWRANK_IMAGE) interpose/libvramcache.map
	$(CXX) -shared -o $@ $(RUNTIME_OBJ) $(INTERPOSE_OBJ) $(IMAGE_OBJ) $(LOWRANK_IMAGE) $(CXXRT) \
	  -Wl,--version-script=interpose/libvramcache.map -Wl,-z,defs \
	  -Wl,-rpath,'$$ORIGIN:$(CUDA)/lib64:$(CUDA)/extras/CUPTI/lib64' -l:libzstd.a -l:liburing.a -ldl -lpthread $(LDSAN)

$(CLI): $(BUILD)/obj/profiler/main.o $(PROFILER_OBJ) $(RUNTIME_OBJ)
	$(CXX) -o $@ $^ -l:libzstd.a -l:liburing.a -lpthread

# ---- Tests without a GPU ----
# Fat binaries nvcc makes of tests/unit/kernels.cu, plain and compressed, for the cubin reader's
# tests (found next to the test program).
TESTDATA := $(BUILD)/testdata/kernels.fatbin $(BUILD)/testdata/kernels-compressed.fatbin
$(BUILD)/testdata/kernels.fatbin: tests/unit/kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=sm_90 --compress-mode=none $< -o $@
$(BUILD)/testdata/kernels-compressed.fatbin: tests/unit/kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=sm_90 --compress-mode=size $< -o $@

$(BUILD)/testdata/fake_kernels.fatbin: tests/fake/fake_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=sm_90 $< -o $@
$(BUILD)/testdata/fake_kernels_wrong.fatbin: tests/fake/fake_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=sm_90 -DWRONG_LAYOUT $< -o $@

# The device launcher is tested with models of its kernels (tests/unit/compress/), next to the
# fat binary it loads.
$(BUILD)/unit_tests: $(UNIT_OBJ) $(PROFILER_OBJ) $(RUNTIME_OBJ) $(BUILD)/obj/interpose/compress/lowrank_device.o | $(TESTDATA) $(LOWRANK_FATBIN)
	$(CXX) $(LDSAN) -o $@ $^ -l:libzstd.a -l:liburing.a -lpthread

$(BUILD)/fake/libcuda.so.1: tests/fake/fake_cuda.cc runtime/piece_hash.h
$(BUILD)/fake/libcuda.so.1: FAKE_OPT := -O2  # it hashes pieces as vramcache's kernel does
$(BUILD)/fake/libcudart.so.13: tests/fake/fake_cudart.cc
$(BUILD)/fake/libcublas.so.13: tests/fake/fake_cublas.cc
$(BUILD)/fake/libcublasLt.so.13: tests/fake/fake_cublasLt.cc
$(BUILD)/fake/libcupti.so.13: tests/fake/fake_cupti.cc
$(BUILD)/fake/libnccl.so.2: tests/fake/fake_nccl.cc
$(BUILD)/fake/libfaketool.so: tests/fake/fake_tool.cc
$(BUILD)/fake-nocupti/libcupti.so.13: tests/fake/fake_nocupti.cc
$(FAKE_LIBS): tests/fake/fake.h
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(FAKE_OPT) $(WARN) -fPIC -fvisibility=hidden -shared -I. $(CUDA_INC) -Wl,-Bsymbolic -Wl,-soname,$(@F) -o $@ $(filter %.cc,$^) -ldl

# Linked like PyTorch: directly against the runtime and cuBLAS (the fakes), never libcuda.
$(BUILD)/interpose_test: $(BUILD)/obj/tests/interpose/interpose_test.o $(FAKE_LIBS)
	$(CXX) $(LDSAN) -o $@ $< -L$(BUILD)/fake -l:libcudart.so.13 -l:libcublas.so.13 -l:libcublasLt.so.13 -l:libnccl.so.2 -ldl

test: $(LIB) $(CLI) $(BUILD)/unit_tests $(FAKE_LIBS) $(BUILD)/interpose_test $(BUILD)/testdata/fake_kernels.fatbin \
      $(BUILD)/testdata/fake_kernels_wrong.fatbin
	$(BUILD)/unit_tests
	bash tests/interpose/run.sh $(BUILD)
	bash tests/cli/run.sh $(BUILD)

# The disk benchmark's driver (scripts/disk_bench.sh runs it beside fio; a benchmark, not a test).
$(BUILD)/disk_bench: $(BUILD)/obj/scripts/disk_bench.o $(RUNTIME_OBJ)
	$(CXX) -o $@ $^ -l:libzstd.a -l:liburing.a -lpthread
$(BUILD)/obj/scripts/%.o: scripts/%.cc
	@mkdir -p $(@D)
	$(CXX) $(BASEFLAGS) $(CXXFLAGS) -c $< -o $@

# ---- Fuzzing (clang's libFuzzer): `make fuzz` builds the targets of tests/fuzz and their seeds;
# scripts/fuzz.sh runs them. trace: the trace reader and what report and simulate do behind it,
# checksums written anew after each mutation; trace_raw: the same with libFuzzer's mutations only;
# cubin: the code image reader.
FUZZ_CXX   ?= clang++-14
FUZZ_FLAGS := -O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_OBJ   := $(patsubst %.cc,$(BUILD)/fuzz/obj/%.o,$(RUNTIME_SRC) $(PROFILER_SRC))
FUZZ_SEEDS := $(BUILD)/fuzz/seeds/trace/training.vctrace $(BUILD)/fuzz/seeds/cubin/kernels.fatbin
.PHONY: fuzz
fuzz: $(addprefix $(BUILD)/fuzz/,trace trace_raw cubin) $(FUZZ_SEEDS)
$(BUILD)/fuzz/obj/%.o: %.cc
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(BASEFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/trace $(BUILD)/fuzz/trace_raw: $(BUILD)/fuzz/%: tests/fuzz/trace_target.cc $(FUZZ_OBJ)
	$(FUZZ_CXX) $(BASEFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer $(if $(findstring raw,$*),-DVC_FUZZ_KEEP_CHECKSUMS) \
	  -o $@ $(filter %.cc %.o,$^) -l:libzstd.a -l:liburing.a -lpthread
$(BUILD)/fuzz/cubin: tests/fuzz/cubin_target.cc $(FUZZ_OBJ)
	$(FUZZ_CXX) $(BASEFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $(filter %.cc %.o,$^) -l:libzstd.a -l:liburing.a -lpthread
$(BUILD)/fuzz/make_seeds: $(BUILD)/obj/tests/fuzz/seeds.o $(RUNTIME_OBJ)
	$(CXX) -o $@ $^ -l:libzstd.a -l:liburing.a -lpthread
$(BUILD)/fuzz/seeds/trace/training.vctrace: $(BUILD)/fuzz/make_seeds $(wildcard samples/traces/*.vctrace)
	@mkdir -p $(@D)
	$(BUILD)/fuzz/make_seeds $(@D) $(wildcard samples/traces/*.vctrace)
$(BUILD)/fuzz/seeds/cubin/kernels.fatbin: $(TESTDATA) $(BUILD)/testdata/fake_kernels.fatbin
	@mkdir -p $(@D)
	cp $^ $(@D)/

# ---- Checks: layering, README options in sync, sanitizers ----
layering: $(CLI)
	@bad=$$(grep -rlE --include='*.h' --include='*.cc' '#include *[<"](cuda|cupti|cublas|dlfcn|generated_cuda)' runtime); \
	  if [ -n "$$bad" ]; then echo "layering: CUDA/CUPTI/dlfcn header in the runtime core: $$bad"; exit 1; fi
	@echo "layering: runtime core includes no CUDA, CUPTI or dlfcn header"
	@bad=$$(grep -rlE --include='*.h' --include='*.cc' '#include *[<"](CLI/|nlohmann/)' runtime interpose); \
	  if [ -n "$$bad" ]; then echo "layering: the command's CLI11 or nlohmann-json in the library: $$bad"; exit 1; fi
	@echo "layering: the library includes neither CLI11 nor nlohmann-json"
	@bash scripts/readme_options.sh --check $(CLI)
	@python3 scripts/gen_observed.py --check $(CUDA)

# The sanitizers' builds compile the tests as the normal one does (TESTOPT, -O1): the fakes hash and
# fill what they hold in the tests' own objects, and at -O0 the tests ran longer than -O1 takes to
# compile.
asan-test:
	$(MAKE) BUILD=$(BUILD)/asan LDSAN="-fsanitize=address,undefined" \
	  CXXFLAGS="-O1 -g1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  $(BUILD)/asan/unit_tests
	$(BUILD)/asan/unit_tests

# ThreadSanitizer: the unit tests of the parts with threads of their own (the frame mover, the disk
# store, the runtime), less the frame mover's every-call-failing case (minutes under TSan; it runs in
# the other builds); then the preloaded library, built with it, in the interposition test's threads
# and explicit paging cases (tests/interpose/tsan.sh; Note [dlsym before start-up] in
# interpose/symbols.cc says how ThreadSanitizer starts under vramcache's dlsym). Suppressions, each
# explained: tests/unit/tsan.supp.
TSAN_UNIT := main test_frames test_disk_store test_runtime
TSAN_OPTS := halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/unit/tsan.supp
$(BUILD)/thread_tests: $(TSAN_UNIT:%=$(BUILD)/obj/tests/unit/%.o) $(RUNTIME_OBJ)
	$(CXX) $(LDSAN) -o $@ $^ -l:libzstd.a -l:liburing.a -lpthread
tsan-test:
	$(MAKE) BUILD=$(BUILD)/tsan LDSAN="-fsanitize=thread" CXXRT= CXXFLAGS="-O1 -g1 -fsanitize=thread -fno-omit-frame-pointer" \
	  $(BUILD)/tsan/thread_tests $(BUILD)/tsan/libvramcache.so $(BUILD)/tsan/interpose_test
	TSAN_OPTIONS="$(TSAN_OPTS)" $(BUILD)/tsan/thread_tests -tce='*device call failing at any point*'
	TSAN_OPTIONS="$(TSAN_OPTS)" bash tests/interpose/tsan.sh $(BUILD)/tsan

# A short soak (scripts/soak.sh: the long one is run by hand and recorded).
soak-test: $(LIB) $(BUILD)/interpose_test $(FAKE_LIBS)
	bash scripts/soak.sh 2000

check: test layering asan-test tsan-test soak-test

# ---- Samples (built here, run on the GPU machine) ----
samples: $(BUILD)/samples/mlp $(BUILD)/samples/managed_residency $(BUILD)/samples/explicit_probe $(BUILD)/samples/managed_probe \
         $(BUILD)/samples/lowrank_check \
         $(BUILD)/samples/piece_hash_check
$(BUILD)/samples/%: scripts/gpu_checks/%.cu scripts/gpu_checks/probe.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -cudart shared \
	  -Xlinker -rpath,$(CUDA)/lib64 $< -o $@ -lcuda
# The device factorization against the host reference (linked with the driver, not under the library).
$(BUILD)/samples/lowrank_check: scripts/gpu_checks/lowrank_check.cc scripts/gpu_checks/probe.h $(BUILD)/obj/interpose/compress/lowrank_device.o \
                                $(LOWRANK_IMAGE) $(BUILD)/obj/runtime/compress/lowrank.o
	@mkdir -p $(@D)
	$(CXX) $(BASEFLAGS) $(CXXFLAGS) $(CUDA_INC) $(filter-out %.h,$^) -o $@ -static-libstdc++ -static-libgcc -L$(CUDA)/lib64/stubs -lcuda
# The kernel compiled in, against the host's definition, and the library's image beside it.
$(BUILD)/samples/piece_hash_check: scripts/gpu_checks/piece_hash_check.cu scripts/gpu_checks/probe.h \
                                   interpose/piece_hash.cu runtime/piece_hash.h $(BUILD)/piece_hash.fatbin
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -I. -gencode arch=compute_90,code='[sm_90,compute_90]' -cudart shared \
	  -Xlinker -rpath,$(CUDA)/lib64 $< -o $@ -lcuda
$(BUILD)/samples/mlp: samples/mlp/mlp.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -Xcompiler -Wall,-Wextra -Werror all-warnings \
	  -gencode arch=compute_90,code=[sm_90,compute_90] -cudart shared \
	  -Xlinker -rpath,$(CUDA)/lib64 $< -o $@ -lcublas -lcuda

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/fuzz -name '*.d' 2>/dev/null)
