# Builds the traced replay (tools/gpu_trace/trace_replay.cc) with g++; benchmarks/gpu_model runs it from the
# repository root:
#   make -f tools/gpu_trace.mk [KERNEL_FFI=DIR] [BUILD=DIR] -j2
# The kernels and the handlers around them (KERNEL_FFI/cuda/*.cu as host C++ on ffi/cuda_emulation) are
# compiled with ThreadSanitizer's instrumentation and no TSan runtime: ffi/cuda_emulation/trace.cc defines
# its entry points and records their accesses. The emulated runtime, the tracer, the host FFI and the
# driver are not instrumented. KERNEL_FFI (default ffi) may be another commit's ffi/ (the retro-diction of
# benchmarks/gpu_model builds that commit's kernels against this tree's runtime and tracer). Objects go to
# BUILD (default build/gpu_trace/current) with their header dependencies; a change of flags recompiles all.

KERNEL_FFI ?= ffi
BUILD ?= build/gpu_trace/current
XLA_FFI_INCLUDE ?= third_party/xla_ffi
EMULATION := ffi/cuda_emulation

BASE_FLAGS := -std=c++17 -O2 -g1 -fno-tree-vectorize -Wall -Wextra -Wno-unused-parameter -pthread
KERNEL_INCLUDES := -I$(EMULATION) -I$(KERNEL_FFI) -I$(KERNEL_FFI)/common -isystem $(XLA_FFI_INCLUDE)
CUDA_FLAGS := $(BASE_FLAGS) -fsanitize=thread -x c++ -DJGO_CUDA_EMULATION -Wno-unknown-pragmas $(KERNEL_INCLUDES)
RUNTIME_FLAGS := $(BASE_FLAGS) -I$(EMULATION)
HOST_FLAGS := $(BASE_FLAGS) -DJGO_WITH_CUDA_EMULATION $(KERNEL_INCLUDES)

OUTPUT := $(BUILD)/trace_replay
# ONLY=message_passing (names of ffi/cuda/*.cu, space-separated) builds those kernels alone (the others'
# handlers are then missing: the driver declares them weak); give it a BUILD of its own.
ONLY ?=
KERNELS := $(if $(ONLY),$(foreach k,$(ONLY),$(KERNEL_FFI)/cuda/$(k).cu),$(wildcard $(KERNEL_FFI)/cuda/*.cu))
OBJECTS := $(patsubst $(KERNEL_FFI)/cuda/%.cu,$(BUILD)/kernels/%.o,$(KERNELS)) \
           $(BUILD)/runtime/emulation.o $(BUILD)/runtime/trace.o \
           $(BUILD)/host/ffi_host.o $(BUILD)/host/case_io.o $(BUILD)/host/trace_replay.o

$(OUTPUT): $(OBJECTS)
	$(CXX) -pthread $^ -ldl -o $@

$(BUILD)/kernels/%.o: $(KERNEL_FFI)/cuda/%.cu $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(CUDA_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/runtime/%.o: $(EMULATION)/%.cc $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(RUNTIME_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/host/%.o: $(KERNEL_FFI)/testing/%.cc $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(HOST_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/host/trace_replay.o: tools/gpu_trace/trace_replay.cc $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(HOST_FLAGS) -MMD -MP -c $< -o $@

# The flags of the last build, rewritten (so recompiling everything) only when they change.
FLAGS_LINE := $(CXX) | $(CUDA_FLAGS) | $(RUNTIME_FLAGS) | $(HOST_FLAGS)
$(BUILD)/flags: FORCE
	@mkdir -p $(@D)
	@echo '$(FLAGS_LINE)' | cmp -s - $@ || echo '$(FLAGS_LINE)' > $@

.PHONY: FORCE
FORCE:

-include $(OBJECTS:.o=.d)
