// Encoder: token embedding + position embedding.
//
// forward:  out[b,t,c] = wte[inp[b,t], c] + wpe[t, c]                  out (B,T,C) bf16, sum in fp32, rounded once
// backward (parameter gradients, fp32, accumulated with +=):
//   dwpe[t, c] += sum_b dout[b,t,c]
//   dwte[v, c] += sum over positions n with inp[n] == v of dout[n, c]
// The backward is deterministic without float atomics: the host groups positions by token with a stable counting
// sort (the tokens are copied to the host first), and each (token, channel) is summed by one thread in position
// order. dwpe is summed over b in order by one thread per (t, c).
#pragma once

#include "common.cuh"

namespace llmc {

__global__ void encoder_forward_kernel(bf16* out, const int* inp, const bf16* wte, const bf16* wpe,
                                       size_t N, size_t T, size_t C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    size_t n = i / C, c = i % C, t = n % T;
    size_t tok = (size_t)inp[n];
    out[i] = to_bf16(to_float(wte[tok * C + c]) + to_float(wpe[t * C + c]));
}

__global__ void encoder_backward_wpe_kernel(float* dwpe, const bf16* dout, size_t B, size_t T, size_t C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (t, c)
    if (i >= T * C) return;
    float acc = 0.0f;
    for (size_t b = 0; b < B; b++) acc += to_float(dout[b * T * C + i]);
    dwpe[i] += acc;
}

// buckets: for bucket k, token = bucket_token[k], its positions are positions[bucket_start[k] .. bucket_start[k+1]).
// The grid is 1-D over (bucket, chunk of blockDim.x channels) pairs; one thread sums one (token, channel).
__global__ void encoder_backward_wte_kernel(float* dwte, const bf16* dout, const int* positions,
                                            const int* bucket_token, const int* bucket_start,
                                            size_t num_buckets, size_t C) {
    size_t chunks = (C + blockDim.x - 1) / blockDim.x;
    size_t k = blockIdx.x / chunks;
    size_t c = (blockIdx.x % chunks) * blockDim.x + threadIdx.x;
    if (k >= num_buckets || c >= C) return;
    float acc = 0.0f;
    for (int p = bucket_start[k]; p < bucket_start[k + 1]; p++) acc += to_float(dout[(size_t)positions[p] * C + c]);
    dwte[(size_t)bucket_token[k] * C + c] += acc;
}

inline void encoder_forward(bf16* out, const int* inp, const bf16* wte, const bf16* wpe, size_t B, size_t T,
                            size_t C, cudaStream_t stream) {
    const size_t block = 256;
    LLMC_LAUNCH(encoder_forward_kernel, grid_size(B * T * C, block), block, 0, stream, out, inp, wte, wpe, B * T, T, C);
}

inline void encoder_backward_wpe(float* dwpe, const bf16* dout, size_t B, size_t T, size_t C, cudaStream_t stream) {
    const size_t block = 256;
    LLMC_LAUNCH(encoder_backward_wpe_kernel, grid_size(T * C, block), block, 0, stream, dwpe, dout, B, T, C);
}

// Host side of the grouping: a stable counting sort of positions 0..N-1 by token. Writes
// packed = [positions (N) | bucket_token (K) | bucket_start (K+1)] and returns K, the number of distinct tokens.
// Buckets are in order of first appearance, positions inside a bucket ascending. count and next are scratch arrays
// of vocab_size entries; count must be all zero on entry and is all zero on return.
inline size_t encoder_group_positions(int* packed, const int* tokens, size_t N, int* count, int* next,
                                      size_t vocab_size) {
    if (N >= 2147483647u) fail("encoder_backward: %zu positions do not fit the int indices of the grouping", N);
    size_t num_buckets = 0;
    for (size_t n = 0; n < N; n++) {
        int tok = tokens[n];
        if (tok < 0 || (size_t)tok >= vocab_size)
            fail("encoder_backward: token %d at position %zu is outside [0, %zu)", tok, n, vocab_size);
        if (count[tok]++ == 0) num_buckets++;
    }
    int* positions = packed;
    int* bucket_token = packed + N;
    int* bucket_start = packed + N + num_buckets;
    size_t k = 0;
    int start = 0;
    for (size_t n = 0; n < N; n++) {
        int tok = tokens[n];
        if (count[tok] > 0) {  // first appearance: open the bucket
            bucket_token[k] = tok;
            bucket_start[k] = start;
            next[tok] = start;
            start += count[tok];
            count[tok] = 0;
            k++;
        }
        positions[next[tok]++] = (int)n;
    }
    bucket_start[num_buckets] = (int)N;
    return num_buckets;
}

inline void encoder_backward_wte(float* dwte, const bf16* dout, const int* packed_device, size_t N,
                                 size_t num_buckets, size_t C, cudaStream_t stream) {
    const size_t block = C >= 256 ? 256 : 32 * ceil_div(C, 32);
    size_t chunks = ceil_div(C, block);
    const int* positions = packed_device;
    const int* bucket_token = packed_device + N;
    const int* bucket_start = packed_device + N + num_buckets;
    LLMC_LAUNCH(encoder_backward_wte_kernel, grid_size(num_buckets * chunks, 1), block, 0, stream, dwte, dout,
                positions, bucket_token, bucket_start, num_buckets, C);
}

}  // namespace llmc
