// Export to HuggingFace transformers' GPT2LMHeadModel: <dir>/model.safetensors + <dir>/config.json, loadable with
// GPT2LMHeadModel.from_pretrained(dir) (fp32).
//
// Name mapping (ours, llmc/layout.h -> HF: each tensor's ParamSpec::hf, llmc/gpt2_params.cpp), per layer i:
//   wte (Vp,C)            transformer.wte.weight (V,C)          the padded rows V..Vp-1 are dropped
//   wpe                   transformer.wpe.weight
//   ln1w/ln1b[i]          transformer.h.i.ln_1.weight/bias
//   qkvw[i] (3C,C)        transformer.h.i.attn.c_attn.weight (C,3C)   HF's Conv1D stores (in, out): transposed
//   qkvb[i]               transformer.h.i.attn.c_attn.bias
//   attprojw[i] (C,C)     transformer.h.i.attn.c_proj.weight (C,C)    transposed
//   attprojb[i]           transformer.h.i.attn.c_proj.bias
//   ln2w/ln2b[i]          transformer.h.i.ln_2.weight/bias
//   fcw[i] (4C,C)         transformer.h.i.mlp.c_fc.weight (C,4C)      transposed
//   fcb[i]                transformer.h.i.mlp.c_fc.bias
//   fcprojw[i] (C,4C)     transformer.h.i.mlp.c_proj.weight (4C,C)    transposed
//   fcprojb[i]            transformer.h.i.mlp.c_proj.bias
//   lnfw/lnfb             transformer.ln_f.weight/bias
// lm_head.weight is tied to transformer.wte.weight (config tie_word_embeddings): like HF's own save_pretrained,
// the file stores it once (safetensors cannot hold two names for one buffer).
//
// safetensors: u64 little-endian header length N, N bytes of JSON ({name: {dtype, shape, data_offsets: [begin,
// end)}} with offsets relative to the data that follows; padded with spaces to a multiple of 8), then the data.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "layout.h"

namespace llmc {

struct HfTensor {
    std::string name;
    std::vector<size_t> shape;
    std::vector<float> data;
};

// Where each HF tensor is in the flat buffer, in HF's order (the tensors before the layers, layer by layer, the rest):
// our rows x row_elems elements at `flat` (`rows` of them only: wte's real vocabulary), HF's name (without the
// "transformer." prefix) and shape, stored transposed (Conv1D's (in, out)) or not.
struct HfTensorPlace {
    std::string name;
    std::vector<size_t> shape;
    size_t flat = 0, rows = 0, row_elems = 0;
    bool transposed = false;
};
std::vector<HfTensorPlace> hf_tensor_places(const ParamLayout& lay);
// The HF tensors of a model given as fp32 values in ParamLayout order, in the order they are written.
std::vector<HfTensor> hf_tensors(const ModelConfig& cfg, const std::vector<float>& params);
// config.json's text for GPT2LMHeadModel.
std::string hf_config_json(const ModelConfig& cfg);
// Writes dir/model.safetensors and dir/config.json, atomically and as a pair (both or neither); creates dir and its
// parents.
void export_hf(const ModelConfig& cfg, const std::vector<float>& params, const std::string& dir);

}  // namespace llmc
