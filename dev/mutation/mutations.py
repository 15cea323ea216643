"""Planted bugs for `make mutation-test` (dev/mutation/run.py; docs/cudasim.md, "Mutation testing").

Each mutation replaces one exact snippet of one file, which must occur exactly once: when the code changes, the
harness stops on the stale entry and names it, so the list is easy to keep up to date. Classes:
  stream    a missing or misordered wait between streams / the host (event, stream synchronisation, pinned reuse)
  shared    shared memory: a missing barrier, a read of a slot no thread wrote
  bounds    an out-of-bounds global load or store
  tail      partial blocks and row or column tails
  numerics  accumulation precision, epsilon, derivative and seed-offset errors
  cublaslt  the GEMM runner's alignment declarations and fallbacks
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    id: str
    cls: str
    file: str
    find: str
    replace: str
    why: str


MUTATIONS = [
    # ---- stream order (llmc/optimizer.h, llmc/cuda/cuda_backend.cu, llmc/cuda/comm_nccl.cu) --------------------
    Mutation(
        "optimizer-reduce-no-main-wait", "stream", "llmc/optimizer.h",
        "            be_.main_waits_comm();  // nothing on the main stream reads the gradients before they are reduced\n",
        "",
        "the main stream no longer waits for the comm stream's gradient reductions"),
    Mutation(
        "optimizer-bucket-no-comm-wait", "stream", "llmc/optimizer.h",
        "        if (bucket_done_[bucket]) fail(\"Optimizer::bucket_ready: bucket %zu announced twice in one micro-step\", bucket);\n"
        "        be_.comm_waits_main();\n",
        "        if (bucket_done_[bucket]) fail(\"Optimizer::bucket_ready: bucket %zu announced twice in one micro-step\", bucket);\n",
        "a bucket's reduction may run before the backward has written its gradients"),
    Mutation(
        "optimizer-gather-no-comm-wait", "stream", "llmc/optimizer.h",
        "            be_.comm_waits_main();  // the gather reads the shard AdamW just wrote\n",
        "",
        "ZeRO-1's parameter gather may run before AdamW wrote the shard"),
    Mutation(
        "optimizer-forward-no-gather-wait", "stream", "llmc/optimizer.h",
        "        if (stage_ >= 1) be_.main_waits_comm();  // the next forward reads the gathered parameters\n",
        "",
        "the next forward may read parameters before the gather wrote them"),
    Mutation(
        "backend-wait-before-record", "stream", "llmc/cuda/cuda_backend.cu",
        "    CUDA_CHECK(cudaEventRecord(main_done_, main_));\n    CUDA_CHECK(cudaStreamWaitEvent(comm_, main_done_, 0));\n",
        "    CUDA_CHECK(cudaStreamWaitEvent(comm_, main_done_, 0));\n    CUDA_CHECK(cudaEventRecord(main_done_, main_));\n",
        "comm_waits_main waits for the event before recording it: it waits for the previous record"),
    Mutation(
        "backend-copy-to-host-no-sync", "stream", "llmc/cuda/cuda_backend.cu",
        "    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, main_));\n"
        "    CUDA_CHECK(cudaStreamSynchronize(main_));\n",
        "    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, main_));\n",
        "copy_to_host returns before its download ran"),
    Mutation(
        "backend-pinned-slot-reuse", "stream", "llmc/cuda/cuda_backend.cu",
        "    CUDA_CHECK(cudaEventSynchronize(encoder_upload_done_[slot]));\n",
        "",
        "the encoder's pinned grouping buffer is rewritten while its previous upload may be pending"),
    Mutation(
        "nccl-barrier-no-device-sync", "stream", "llmc/cuda/comm_nccl.cu",
        "        CUDA_CHECK(cudaDeviceSynchronize());\n        NCCL_CHECK(ncclAllReduce(barrier_buf_",
        "        NCCL_CHECK(ncclAllReduce(barrier_buf_",
        "the barrier's collective on the legacy stream is not ordered after the non-blocking streams' collectives"),
    # ---- shared memory ---------------------------------------------------------------------------------------
    Mutation(
        "common-block-sum-no-war-barrier", "shared", "llmc/cuda/common.cuh",
        "    v = warp_sum(v);\n    __syncthreads();\n    if (lane == 0) scratch[warp] = v;\n",
        "    v = warp_sum(v);\n    if (lane == 0) scratch[warp] = v;\n",
        "block_sum's write-after-read barrier: a second reduction overwrites partials still being read"),
    Mutation(
        "common-block-sum-reads-unwritten", "shared", "llmc/cuda/common.cuh",
        "    v = lane < num_warps ? scratch[lane] : 0.0f;\n    return warp_sum(v);\n",
        "    (void)num_warps;\n    v = scratch[lane];\n    return warp_sum(v);\n",
        "block_sum reads all 32 partial slots, also those no warp of a smaller block wrote"),
    Mutation(
        "classifier-reads-unwritten-partials", "shared", "llmc/cuda/classifier.cuh",
        "    m = lane < num_warps ? smax[lane] : -3.402823466e38f;\n    s = lane < num_warps ? ssum[lane] : 0.0f;\n",
        "    (void)num_warps;\n    m = smax[lane];\n    s = ssum[lane];\n",
        "the classifier combines all 32 per-warp slots, also unwritten ones"),
    Mutation(
        "classifier-no-barrier-before-overwrite", "shared", "llmc/cuda/classifier.cuh",
        "    // Thread 0 read x[target] above; make sure that read happened before anyone overwrites the row.\n    __syncthreads();\n",
        "",
        "the gradient overwrites the row before thread 0 read the target logit"),
    Mutation(
        "reduce-column-sums-no-barrier", "shared", "llmc/cuda/reduce.cuh",
        "    warp_sums[warp][lane] = acc;\n    __syncthreads();\n",
        "    warp_sums[warp][lane] = acc;\n",
        "column sums read the warp partials before the other warps wrote them"),
    Mutation(
        "layernorm-backward-no-partials-init", "shared", "llmc/cuda/layernorm.cuh",
        "    for (size_t c = threadIdx.x; c < C; c += blockDim.x) dw[c] = db[c] = 0.0f;\n",
        "",
        "the backward's shared dweight/dbias partials are not zeroed before they are accumulated"),
    # ---- bounds ------------------------------------------------------------------------------------------------
    Mutation(
        "encoder-forward-off-by-one", "bounds", "llmc/cuda/encoder.cuh",
        "    if (i >= N * C) return;\n    size_t n = i / C, c = i % C, t = n % T;\n",
        "    if (i > N * C) return;\n    size_t n = i / C, c = i % C, t = n % T;\n",
        "the encoder's last thread writes one element past the output"),
    Mutation(
        "gelu-forward-off-by-one", "bounds", "llmc/cuda/gelu.cuh",
        "    if (i < n) out[i] = to_bf16(gelu_f(to_float(inp[i])));\n",
        "    if (i <= n) out[i] = to_bf16(gelu_f(to_float(inp[i])));\n",
        "GELU forward reads and writes one element past the end"),
    Mutation(
        "attention-permute-off-by-one", "bounds", "llmc/cuda/attention.cuh",
        "    if (i >= B * NH * T * hs) return;\n    size_t d = i % hs, t = (i / hs) % T, h = (i / (hs * T)) % NH, b = i / (hs * T * NH);\n    size_t C = NH * hs;\n    const bf16* src",
        "    if (i > B * NH * T * hs) return;\n    size_t d = i % hs, t = (i / hs) % T, h = (i / (hs * T)) % NH, b = i / (hs * T * NH);\n    size_t C = NH * hs;\n    const bf16* src",
        "the q/k/v permute reads and writes one element past the end"),
    Mutation(
        "adamw-off-by-one", "bounds", "llmc/cuda/adamw.cuh",
        "    if (i >= n) return;\n    float g = grad_scale * grads[i];\n",
        "    if (i > n) return;\n    float g = grad_scale * grads[i];\n",
        "AdamW updates one element past its shard"),
    # ---- tails -------------------------------------------------------------------------------------------------
    Mutation(
        "matmul-bias-partials-no-row-clamp", "tail", "llmc/cuda/matmul.cuh",
        "    size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block < N ? r0 + rows_per_block : N;\n",
        "    size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block;\n",
        "the last row block of the bias gradient runs past the last row"),
    Mutation(
        "layernorm-backward-no-row-clamp", "tail", "llmc/cuda/layernorm.cuh",
        "    const size_t row_end = row_begin + rows_per_block < N ? row_begin + rows_per_block : N;\n",
        "    const size_t row_end = row_begin + rows_per_block;\n",
        "the last block of the layernorm backward runs past the last row"),
    Mutation(
        "reduce-column-sums-tail-write", "tail", "llmc/cuda/reduce.cuh",
        "    if (warp == 0 && c < C) {\n",
        "    if (warp == 0) {\n",
        "column sums write the columns past C of the last 32-column block"),
    Mutation(
        "encoder-wte-chunks-floor", "tail", "llmc/cuda/encoder.cuh",
        "    size_t chunks = ceil_div(C, block);\n",
        "    size_t chunks = C / block;\n",
        "the encoder backward launches too few channel chunks when C is not a multiple of the block"),
    Mutation(
        "attention-softmax-skips-diagonal", "tail", "llmc/cuda/attention.cuh",
        "    for (size_t j = lane; j <= t; j += 32) sum += expf(to_float(row[j]) - mx);\n",
        "    for (size_t j = lane; j < t; j += 32) sum += expf(to_float(row[j]) - mx);\n",
        "the causal softmax's normaliser leaves out the diagonal"),
    # ---- numerics ----------------------------------------------------------------------------------------------
    Mutation(
        "layernorm-no-epsilon", "numerics", "llmc/cuda/layernorm.cuh",
        "    const float r = rsqrtf(warp_sum(v) / (float)C + kLayerNormEps);\n",
        "    const float r = rsqrtf(warp_sum(v) / (float)C);\n",
        "layernorm without epsilon: constant rows give inf"),
    Mutation(
        "matmul-bias-partials-bf16-accumulation", "numerics", "llmc/cuda/matmul.cuh",
        "    float acc = 0.0f;\n    for (size_t r = r0; r < r1; r++) acc += to_float(dout[r * OC + col]);\n    partials[g * OC + col] = acc;\n",
        "    bf16 acc = to_bf16(0.0f);\n    for (size_t r = r0; r < r1; r++) acc = to_bf16(to_float(acc) + to_float(dout[r * OC + col]));\n    partials[g * OC + col] = to_float(acc);\n",
        "the bias gradient's row-block partial sums accumulate in bf16"),
    Mutation(
        "reduce-partials-bf16-accumulation", "numerics", "llmc/cuda/reduce.cuh",
        "        for (size_t g = warp; g < G; g += kColumnSumWarps) acc += partials[g * C + c];\n",
        "        for (size_t g = warp; g < G; g += kColumnSumWarps) acc = to_float(to_bf16(acc + partials[g * C + c]));\n",
        "the column sums of the partials accumulate in bf16"),
    Mutation(
        "adamw-ignores-seed-offset", "numerics", "llmc/cuda/adamw.cuh",
        "    params[i] = stochastic_round_bf16(w, hash_index(seed, seed_offset + i));\n",
        "    params[i] = stochastic_round_bf16(w, hash_index(seed, i));\n",
        "AdamW's stochastic rounding ignores the shard's offset in its tensor"),
    Mutation(
        "gelu-backward-wrong-derivative", "numerics", "llmc/cuda/gelu.cuh",
        "    float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);\n",
        "    float du = kGeluScale * (1.0f + 0.044715f * x * x);\n",
        "GELU's derivative misses the factor 3 of the cubic term"),
    Mutation(
        "classifier-online-max-no-rescale", "numerics", "llmc/cuda/classifier.cuh",
        "        if (v > m) {\n            s *= expf(m - v);\n            m = v;\n        }\n",
        "        if (v > m) m = v;\n",
        "the classifier's online softmax does not rescale its running sum when the maximum grows"),
    # ---- cuBLASLt alignment and fallbacks ----------------------------------------------------------------------
    Mutation(
        "gemm-no-epilogue-alignment-check", "cublaslt", "llmc/cuda/matmul.cuh",
        "        if ((g.bias && (uintptr_t)g.bias % 16 != 0) || (g.aux && (uintptr_t)g.aux % 16 != 0)) return false;\n",
        "",
        "a misaligned bias or pre-GELU buffer goes to the fused epilogue (a device fault) instead of the fallback"),
    Mutation(
        "gemm-declares-256-byte-alignment", "cublaslt", "llmc/cuda/matmul.cuh",
        "        unsigned al = 256;\n        while (al > 1 && a % al != 0) al >>= 1;\n        return al;\n",
        "        (void)a;\n        return 256;\n",
        "the GEMM runner declares every pointer 256-byte aligned, whatever its offset"),
    Mutation(
        "gemm-fallback-drops-bias", "cublaslt", "llmc/cuda/matmul.cuh",
        "    if (bias) LLMC_LAUNCH(add_bias_kernel, grid_size(N * OC, 256), 256, 0, stream, out, bias, N, OC);\n",
        "",
        "the unfused fallback (taken for a misaligned bias) forgets to add the bias"),
    Mutation(
        "gemm-gelu-fallback-skips-gelu", "cublaslt", "llmc/cuda/matmul.cuh",
        "    linear_forward(gemm, pre_gelu, inp, w, bias, N, C, OC, stream);\n    gelu_forward(out, pre_gelu, N * OC, stream);\n",
        "    linear_forward(gemm, pre_gelu, inp, w, bias, N, C, OC, stream);\n",
        "the GELU fallback (OC not a multiple of 8, or a misaligned aux buffer) leaves out the GELU"),
]
