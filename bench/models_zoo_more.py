"""More models for bench/models.py (`--zoo more` or `--zoo all`): families and constructs
the main suite does not have — a mixture of experts (Mixtral), Gemma 2's eager attention
with soft-capping, MobileBERT, Funnel's pooling, ConvBERT, MobileViT, Segformer, LeViT,
XCiT, EVA-02, HRNet, torchvision's VGG/GoogLeNet/Swin..., and suite models trained with
transformers' gradient checkpointing (`*_gc`). Same conventions as models_zoo.py (tiny
configs, random weights, nothing downloaded)."""
from __future__ import annotations

from models_zoo import (BART, BY_NAME as SUITE, CLASSES, ENC, GQA, IMG, VOCAB, W2V, VIT, ModelSpec, audio,
                        class_loss, hf, model_loss, pixels, seq2seq, tm, tokens, tv)

def checkpointed(name: str, **kwargs) -> ModelSpec:
    """Suite model `name` with `gradient_checkpointing_enable(kwargs or transformers' default)`:
    each layer's call goes through torch.utils.checkpoint in training."""
    spec = SUITE[name]

    def build():
        model = spec.build()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs or None)
        return model

    suffix = "_gc" + "".join(f"_{k}" for k, v in kwargs.items() if v)
    return ModelSpec(name + suffix.replace("use_", ""), spec.family, spec.source, build, spec.inputs, spec.loss)


MORE: list[ModelSpec] = [
    checkpointed("llama"), checkpointed("llama", use_reentrant=True), checkpointed("gpt2"), checkpointed("bert"),
    ModelSpec("mixtral", "decoder", "transformers", hf("MixtralForCausalLM", "MixtralConfig", **GQA, num_local_experts=4, num_experts_per_tok=2), tokens("ids"), model_loss),
    ModelSpec("phi3", "decoder", "transformers", hf("Phi3ForCausalLM", "Phi3Config", **GQA, pad_token_id=0), tokens("ids"), model_loss),
    ModelSpec("stablelm", "decoder", "transformers", hf("StableLmForCausalLM", "StableLmConfig", **GQA), tokens("ids"), model_loss),
    ModelSpec("gpt_bigcode", "decoder", "transformers", hf("GPTBigCodeForCausalLM", "GPTBigCodeConfig", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False), tokens("ids"), model_loss),
    ModelSpec("codegen", "decoder", "transformers", hf("CodeGenForCausalLM", "CodeGenConfig", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, use_cache=False), tokens("ids"), model_loss),
    ModelSpec("gemma2", "decoder", "transformers", hf("Gemma2ForCausalLM", "Gemma2Config", **GQA, head_dim=8), tokens("ids"), model_loss),
    ModelSpec("starcoder2", "decoder", "transformers", hf("Starcoder2ForCausalLM", "Starcoder2Config", **GQA), tokens("ids"), model_loss),
    ModelSpec("olmo", "decoder", "transformers", hf("OlmoForCausalLM", "OlmoConfig", **GQA), tokens("ids"), model_loss),
    ModelSpec("xglm", "decoder", "transformers", hf("XGLMForCausalLM", "XGLMConfig", vocab_size=VOCAB, d_model=32, ffn_dim=64, num_layers=2, attention_heads=4, max_position_embeddings=64, use_cache=False), tokens("ids"), model_loss),
    ModelSpec("mobilebert", "encoder", "transformers", hf("MobileBertForSequenceClassification", "MobileBertConfig", **ENC, embedding_size=16, intra_bottleneck_size=16, num_labels=2), tokens("class"), model_loss),
    ModelSpec("xlm_roberta", "encoder", "transformers", hf("XLMRobertaForSequenceClassification", "XLMRobertaConfig", **ENC, num_labels=2), tokens("class"), model_loss),
    ModelSpec("convbert", "encoder", "transformers", hf("ConvBertForSequenceClassification", "ConvBertConfig", **ENC, num_labels=2), tokens("class"), model_loss),
    ModelSpec("mpnet", "encoder", "transformers", hf("MPNetForSequenceClassification", "MPNetConfig", **ENC, num_labels=2), tokens("class"), model_loss),
    ModelSpec("roformer", "encoder", "transformers", hf("RoFormerForSequenceClassification", "RoFormerConfig", **ENC, num_labels=2), tokens("class"), model_loss),
    ModelSpec("funnel", "encoder", "transformers", hf("FunnelForSequenceClassification", "FunnelConfig", vocab_size=VOCAB, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1], num_labels=2), tokens("class"), model_loss),
    ModelSpec("squeezebert", "encoder", "transformers", hf("SqueezeBertForSequenceClassification", "SqueezeBertConfig", **ENC, embedding_size=32, num_labels=2), tokens("class"), model_loss),
    ModelSpec("pegasus", "encoder-decoder", "transformers", hf("PegasusForConditionalGeneration", "PegasusConfig", **BART), seq2seq, model_loss),
    ModelSpec("blenderbot", "encoder-decoder", "transformers", hf("BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig", **BART), seq2seq, model_loss),
    ModelSpec("beit", "vision-transformer", "transformers", hf("BeitForImageClassification", "BeitConfig", **VIT), pixels(), model_loss),
    ModelSpec("dinov2", "vision-transformer", "transformers", hf("Dinov2ForImageClassification", "Dinov2Config", **VIT), pixels(), model_loss),
    ModelSpec("segformer", "vision-transformer", "transformers", hf("SegformerForImageClassification", "SegformerConfig", num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("hf_resnet", "cnn", "transformers", hf("ResNetForImageClassification", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("mobilevit", "vision-transformer", "transformers", hf("MobileViTForImageClassification", "MobileViTConfig", image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_labels=CLASSES), pixels(), model_loss),
    ModelSpec("wavlm", "speech", "transformers", hf("WavLMForCTC", "WavLMConfig", **W2V), audio("ctc"), model_loss),
    ModelSpec("data2vec_audio", "speech", "transformers", hf("Data2VecAudioForCTC", "Data2VecAudioConfig", **W2V), audio("ctc"), model_loss),
    ModelSpec("tv_vgg11", "cnn", "torchvision", tv("vgg11"), IMG, class_loss),
    ModelSpec("tv_googlenet", "cnn", "torchvision", tv("googlenet", aux_logits=False, init_weights=False), IMG, class_loss),
    ModelSpec("tv_mnasnet", "cnn", "torchvision", tv("mnasnet0_5"), IMG, class_loss),
    ModelSpec("tv_mobilenet_v2", "cnn", "torchvision", tv("mobilenet_v2"), IMG, class_loss),
    ModelSpec("tv_convnext", "cnn", "torchvision", tv("convnext_tiny"), IMG, class_loss),
    ModelSpec("tv_swin_t", "vision-transformer", "torchvision", tv("swin_t"), IMG, class_loss),
    ModelSpec("tv_resnext", "cnn", "torchvision", tv("resnext50_32x4d"), IMG, class_loss),
    ModelSpec("timm_levit", "vision-transformer", "timm", tm("levit_128s", img_size=32), IMG, class_loss),
    ModelSpec("timm_mobilevit", "vision-transformer", "timm", tm("mobilevit_xxs"), pixels("x", 64), class_loss),
    ModelSpec("timm_poolformer", "cnn", "timm", tm("poolformer_s12"), IMG, class_loss),
    ModelSpec("timm_dla", "cnn", "timm", tm("dla34"), IMG, class_loss),
    ModelSpec("timm_repvgg", "cnn", "timm", tm("repvgg_a0"), IMG, class_loss),
    ModelSpec("timm_rexnet", "cnn", "timm", tm("rexnet_100"), IMG, class_loss),
    ModelSpec("timm_mixnet", "cnn", "timm", tm("mixnet_s"), IMG, class_loss),
    ModelSpec("timm_cspresnet", "cnn", "timm", tm("cspresnet50"), IMG, class_loss),
    ModelSpec("timm_xcit", "vision-transformer", "timm", tm("xcit_nano_12_p16_224", img_size=32), IMG, class_loss),
    ModelSpec("timm_eva02", "vision-transformer", "timm", tm("eva02_tiny_patch14_224", img_size=28), pixels("x", 28), class_loss),
    ModelSpec("timm_coat", "vision-transformer", "timm", tm("coat_lite_tiny", img_size=32), IMG, class_loss),
    ModelSpec("timm_pit", "vision-transformer", "timm", tm("pit_ti_224", img_size=32), IMG, class_loss),
    ModelSpec("timm_hrnet", "cnn", "timm", tm("hrnet_w18_small"), pixels("x", 64), class_loss),
]

BY_NAME = {**SUITE, **{spec.name: spec for spec in MORE}}
