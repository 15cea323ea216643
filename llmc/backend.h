// The backend boundary.
//
// The model (llmc/model.h), the optimizer glue and the training loop are templates over a Backend class. They never
// include a backend's headers; train_gpt2.cu / test_gpt2.cu pick one:
//
//   llmc/cpu/cpu_backend.h    CpuBackend   act_t = float           (g++ build: ./train_gpt2_cpu, ./test_gpt2_cpu)
//   llmc/cuda/cuda_backend.h  CudaBackend  act_t = __nv_bfloat16   (nvcc build: ./train_gpt2, ./test_gpt2; and g++ with
//                                                                    the simulator's headers for tests)
//
// Every backend has the same member functions with the same signatures (only act_t differs). The canonical list, with
// the math and the conventions of each op, is in llmc/cpu/cpu_backend.h; the CUDA backend mirrors it exactly.
//
// Conventions shared by all backends:
//   - "device" pointers are whatever the backend computes on (host memory for the CPU backend);
//   - act_t holds parameters and activations; gradients of parameters, the optimizer state, the layernorm statistics
//     and the losses are float;
//   - parameter gradients are accumulated with +=, activation gradients are written with =, except on the residual
//     stream, where layernorm_backward adds into dinp (+=);
//   - all ops are enqueued on the backend's main stream in call order; copy_to_host synchronises;
//   - sizes are size_t; N = B*T rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc {

// Element types that cross the backend boundary (collectives, conversions). The integer types are for the comm's
// host channel (llmc/comm.h: control data such as flags, sizes and checksums); the model computes in F32 and BF16.
enum class DType { F32, BF16, I32, U64 };
inline size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: case DType::I32: return 4;
        case DType::BF16: return 2;
        case DType::U64: return 8;
    }
    return 0;
}
const char* dtype_name(DType t);  // "f32", "bf16", "i32", "u64" (llmc/comm.cpp)

// Options a backend is created with (the subset of the command line a backend cares about).
struct BackendOptions {
    int device = 0;          // GPU index (local rank); ignored on the CPU
    int num_threads = 0;     // CPU threads (0 = OpenMP default)
    bool recompute_gelu = false;  // -r >= 1 (the model drops the saved GELU output and recomputes it in backward)
    uint64_t seed = 1337;    // base seed of anything random inside the backend
};

// A backend allocation freed when it goes out of scope, also when an exception unwinds (the trainer's and the
// checkpointer's small buffers: loss accumulators, flags).
template <class Backend, class T>
class DeviceArray {
public:
    DeviceArray(Backend& be, size_t n) : be_(be), p_(static_cast<T*>(be.alloc(n * sizeof(T)))) {}
    ~DeviceArray() { be_.free(p_); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    T* get() const { return p_; }

private:
    Backend& be_;
    T* p_;
};

// One device buffer of a memory plan (--dry-run, llmc/memory_plan.h): the model's activations and each backend's
// scratch_plan() are lists of these. The shape is in the model's symbols: L layers, B, T, N = B*T rows, C channels,
// NH heads, Vp padded vocabulary.
struct BufferSize {
    const char* name = "";
    std::string shape;
    size_t count = 0, elem_bytes = 0;
    size_t bytes() const { return count * elem_bytes; }
};

}  // namespace llmc
