"""A third set of models for bench/models.py (`--zoo extra`): families neither
models_zoo.py nor models_zoo_more.py has — mixtures of experts (Qwen2-MoE, Qwen3-MoE,
OLMoE, GraniteMoE), state-space and recurrent models (Mamba, Mamba2, RWKV),
sparse and long-range attention (BigBird, Longformer, Nyströmformer), T5 variants (mT5,
UMT5, Switch Transformers), hierarchical vision models (Swin v2, FocalNet, PVT),
speech (SEW, UniSpeech, Wav2Vec2-Conformer) and timm/torchvision architectures (MaxViT,
FastViT, ResNeSt, EdgeNeXt, MobileOne, GCViT, Twins, CaiT, VOLO, MobileNetV4, MambaOut,
Inception v3...). Same conventions as models_zoo.py."""
from __future__ import annotations

from models_zoo import (BART, CLASSES, ENC, GQA, IMG, VIT, W2V, ModelSpec, audio, class_loss, hf, model_loss,
                        pixels, seq2seq, tm, tokens, tv)
from models_zoo_more import BY_NAME as MORE_BY_NAME

MOE = dict(GQA, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
T5 = dict(vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
          use_cache=False)
MAMBA = dict(vocab_size=256, hidden_size=32, state_size=8, num_hidden_layers=2, use_cache=False)

EXTRA: list[ModelSpec] = [
    ModelSpec("qwen2_moe", "decoder", "transformers", hf("Qwen2MoeForCausalLM", "Qwen2MoeConfig", **MOE, shared_expert_intermediate_size=32), tokens("ids"), model_loss),
    ModelSpec("qwen3_moe", "decoder", "transformers", hf("Qwen3MoeForCausalLM", "Qwen3MoeConfig", **MOE, head_dim=8), tokens("ids"), model_loss),
    ModelSpec("olmoe", "decoder", "transformers", hf("OlmoeForCausalLM", "OlmoeConfig", **dict(GQA, num_experts=4, num_experts_per_tok=2)), tokens("ids"), model_loss),
    ModelSpec("granitemoe", "decoder", "transformers", hf("GraniteMoeForCausalLM", "GraniteMoeConfig", **dict(GQA, num_local_experts=4, num_experts_per_tok=2)), tokens("ids"), model_loss),
    ModelSpec("gemma3", "decoder", "transformers", hf("Gemma3ForCausalLM", "Gemma3TextConfig", **GQA, head_dim=8, sliding_window=4), tokens("ids"), model_loss),
    ModelSpec("cohere", "decoder", "transformers", hf("CohereForCausalLM", "CohereConfig", **GQA), tokens("ids"), model_loss),
    ModelSpec("glm", "decoder", "transformers", hf("GlmForCausalLM", "GlmConfig", **GQA, head_dim=8, pad_token_id=0), tokens("ids"), model_loss),
    ModelSpec("granite", "decoder", "transformers", hf("GraniteForCausalLM", "GraniteConfig", **GQA), tokens("ids"), model_loss),
    ModelSpec("olmo2", "decoder", "transformers", hf("Olmo2ForCausalLM", "Olmo2Config", **GQA), tokens("ids"), model_loss),
    ModelSpec("gpt_neo", "decoder", "transformers", hf("GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=256, hidden_size=32, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=64, use_cache=False), tokens("ids"), model_loss),
    ModelSpec("mpt", "decoder", "transformers", hf("MptForCausalLM", "MptConfig", vocab_size=256, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, use_cache=False), tokens("ids"), model_loss),
    ModelSpec("mamba", "decoder", "transformers", hf("MambaForCausalLM", "MambaConfig", **MAMBA), tokens("ids", mask=False), model_loss),
    ModelSpec("mamba2", "decoder", "transformers", hf("Mamba2ForCausalLM", "Mamba2Config", vocab_size=256, hidden_size=32, state_size=8, num_heads=4, head_dim=16, n_groups=1, expand=2, chunk_size=8, num_hidden_layers=2, use_cache=False), tokens("ids", mask=False), model_loss),
    ModelSpec("rwkv", "decoder", "transformers", hf("RwkvForCausalLM", "RwkvConfig", vocab_size=256, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64, context_length=64, use_cache=False), tokens("ids", mask=False), model_loss),
    ModelSpec("big_bird", "encoder", "transformers", hf("BigBirdForSequenceClassification", "BigBirdConfig", **ENC, attention_type="original_full", num_labels=2), tokens("class"), model_loss),
    ModelSpec("longformer", "encoder", "transformers", hf("LongformerForSequenceClassification", "LongformerConfig", **ENC, attention_window=4, num_labels=2), tokens("class"), model_loss),
    ModelSpec("nystromformer", "encoder", "transformers", hf("NystromformerForSequenceClassification", "NystromformerConfig", **ENC, num_landmarks=4, segment_means_seq_len=8, num_labels=2), tokens("class"), model_loss),
    ModelSpec("ernie", "encoder", "transformers", hf("ErnieForSequenceClassification", "ErnieConfig", **ENC, num_labels=2), tokens("class"), model_loss),
    ModelSpec("layoutlm", "encoder", "transformers", hf("LayoutLMForSequenceClassification", "LayoutLMConfig", **ENC, num_labels=2), tokens("class"), model_loss),
    ModelSpec("mt5", "encoder-decoder", "transformers", hf("MT5ForConditionalGeneration", "MT5Config", **T5), seq2seq, model_loss),
    ModelSpec("umt5", "encoder-decoder", "transformers", hf("UMT5ForConditionalGeneration", "UMT5Config", **T5), seq2seq, model_loss),
    ModelSpec("switch", "encoder-decoder", "transformers", hf("SwitchTransformersForConditionalGeneration", "SwitchTransformersConfig", **T5, num_experts=4, expert_capacity=8, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1, decoder_start_token_id=0), seq2seq, model_loss),
    ModelSpec("led", "encoder-decoder", "transformers", hf("LEDForConditionalGeneration", "LEDConfig", **dict(BART, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64), attention_window=4), seq2seq, model_loss),
    ModelSpec("swinv2", "vision-transformer", "transformers", hf("Swinv2ForImageClassification", "Swinv2Config", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("focalnet", "cnn", "transformers", hf("FocalNetForImageClassification", "FocalNetConfig", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("pvt", "vision-transformer", "transformers", hf("PvtForImageClassification", "PvtConfig", image_size=32, num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("convnextv2", "cnn", "transformers", hf("ConvNextV2ForImageClassification", "ConvNextV2Config", num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("vit_msn", "vision-transformer", "transformers", hf("ViTMSNForImageClassification", "ViTMSNConfig", **VIT), pixels(), model_loss),
    ModelSpec("data2vec_vision", "vision-transformer", "transformers", hf("Data2VecVisionForImageClassification", "Data2VecVisionConfig", **VIT), pixels(), model_loss),
    ModelSpec("sew", "speech", "transformers", hf("SEWForCTC", "SEWConfig", **W2V, squeeze_factor=2), audio("ctc"), model_loss),
    ModelSpec("unispeech", "speech", "transformers", hf("UniSpeechForCTC", "UniSpeechConfig", **W2V), audio("ctc"), model_loss),
    ModelSpec("w2v2_conformer", "speech", "transformers", hf("Wav2Vec2ConformerForCTC", "Wav2Vec2ConformerConfig", **W2V, conv_depthwise_kernel_size=3), audio("ctc"), model_loss),
    ModelSpec("timm_maxvit", "vision-transformer", "timm", tm("maxvit_nano_rw_256", img_size=64), pixels("x", 64), class_loss),
    ModelSpec("timm_fastvit", "cnn", "timm", tm("fastvit_t8"), IMG, class_loss),
    ModelSpec("timm_resnest", "cnn", "timm", tm("resnest14d"), IMG, class_loss),
    ModelSpec("timm_edgenext", "cnn", "timm", tm("edgenext_xx_small"), pixels("x", 64), class_loss),
    ModelSpec("timm_mobileone", "cnn", "timm", tm("mobileone_s0"), IMG, class_loss),
    ModelSpec("timm_gcvit", "vision-transformer", "timm", tm("gcvit_xxtiny", img_size=64), pixels("x", 64), class_loss),
    ModelSpec("timm_twins", "vision-transformer", "timm", tm("twins_svt_small", img_size=64), pixels("x", 64), class_loss),
    ModelSpec("timm_cait", "vision-transformer", "timm", tm("cait_xxs24_224", img_size=32), IMG, class_loss),
    ModelSpec("timm_volo", "vision-transformer", "timm", tm("volo_d1_224", img_size=64), pixels("x", 64), class_loss),
    ModelSpec("timm_mobilenetv4", "cnn", "timm", tm("mobilenetv4_conv_small"), IMG, class_loss),
    ModelSpec("timm_mambaout", "cnn", "timm", tm("mambaout_femto"), IMG, class_loss),
    ModelSpec("tv_inception_v3", "cnn", "torchvision", tv("inception_v3", aux_logits=False, init_weights=False), pixels("x", 75), class_loss),
    ModelSpec("tv_efficientnet_v2", "cnn", "torchvision", tv("efficientnet_v2_s"), IMG, class_loss),
    ModelSpec("tv_shufflenet", "cnn", "torchvision", tv("shufflenet_v2_x0_5"), IMG, class_loss),
    ModelSpec("tv_mobilenet_v3_large", "cnn", "torchvision", tv("mobilenet_v3_large"), IMG, class_loss),
]

BY_NAME = {**MORE_BY_NAME, **{spec.name: spec for spec in EXTRA}}
