// The start-up message of the CUDA trainer on a machine where CUDA finds no usable GPU: CUDA's own words ("CUDA
// driver version is insufficient for CUDA runtime version", error 35, on a machine without an NVIDIA driver; "no
// CUDA-capable device is detected", 100) do not say what to do. Host-only, so it is tested without a GPU (the
// simulator answers with these errors under CUDASIM_NO_GPU).
#pragma once

#include <string>

namespace llmc {

// True for the CUDA errors that mean "no usable GPU here" (35: no or too old a driver, 100: no device), or for a
// device count of 0 after success (code 0).
inline bool is_no_gpu_error(int code, int device_count) {
    return code == 35 || code == 100 || (code == 0 && device_count == 0);
}

// "no GPU: CUDA reports error 35 (<CUDA's text>) at start-up: use ./train_gpt2_cpu, ..."
inline std::string no_gpu_message(int code, const char* text) {
    const std::string why = code == 0 ? "CUDA sees 0 devices"
                                      : "CUDA reports error " + std::to_string(code) + " (" + (text ? text : "?") + ")";
    return "no GPU: " + why + " at start-up: use ./train_gpt2_cpu, the same trainer on the CPU (same flags; "
           "scripts/quickstart.sh picks it by itself)";
}

}  // namespace llmc
