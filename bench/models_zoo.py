"""The models of bench/models.py, as data: one ModelSpec per model (name, family, where it
comes from, a builder, an input maker, a loss).

Every model is tiny (hidden 32-64, 2 layers, 8-16 tokens, 32-64 px images), built from a
config with random weights: nothing is downloaded. Libraries are imported when a builder
runs, so listing the specs imports none of them.

A builder returns the model with every dropout probability 0 (configs' `*drop*` floats,
then `zero_dropout` over the modules), so training is deterministic; `inputs(task)`
returns the keyword arguments of one call (training's carry the labels of models that
compute their loss in forward); `loss(output, inputs)` is the training step's scalar.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn.functional as F

BATCH = 2
SEQ = 8
VOCAB = 256
IMAGE = 32
CLASSES = 10
AUDIO = 1600  # samples: wav2vec2-like feature extractors below reduce it to ~20 frames
MELS = 16


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # decoder, encoder, encoder-decoder, vision-transformer, cnn, speech
    source: str  # transformers, timm, torchvision
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[str], dict]  # task ("infer"/"train") -> keyword arguments of one call
    loss: Callable[[object, dict], torch.Tensor]  # (output, inputs) -> training loss


# --- dropout ----------------------------------------------------------------------------

def zero_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """Every dropout-like module's probability to 0 (nn.Dropout*, timm's DropPath,
    torchvision's StochasticDepth): training runs the same ops as eager, deterministically."""
    for m in model.modules():
        name = type(m).__name__.lower()
        if ("drop" in name or "stochastic" in name) and isinstance(getattr(m, "p", None), float):
            m.p = 0.0
        if "drop" in name and isinstance(getattr(m, "drop_prob", None), float):
            m.drop_prob = 0.0
    return model


def _no_drop_config(config):
    """A transformers config with every float whose name says dropout (or SpecAugment
    masking, which draws from NumPy's RNG in training) set to 0."""
    for key, value in config.to_dict().items():
        if isinstance(value, float) and ("drop" in key or key.startswith("mask_") and key.endswith("_prob")):
            setattr(config, key, 0.0)
    return config


# --- builders ---------------------------------------------------------------------------

def hf(model_cls: str, config_cls: str, **config) -> Callable[[], torch.nn.Module]:
    """A transformers model from its config class, random weights, dropout off."""
    def build():
        import transformers
        cfg = _no_drop_config(getattr(transformers, config_cls)(**config))
        return zero_dropout(getattr(transformers, model_cls)(cfg))
    return build


def tv(name: str, **kwargs) -> Callable[[], torch.nn.Module]:
    def build():
        import torchvision
        return zero_dropout(getattr(torchvision.models, name)(weights=None, num_classes=CLASSES, **kwargs))
    return build


def tm(name: str, **kwargs) -> Callable[[], torch.nn.Module]:
    def build():
        import timm
        return zero_dropout(timm.create_model(name, pretrained=False, num_classes=CLASSES, **kwargs))
    return build


# --- inputs -----------------------------------------------------------------------------

def _ids(seq=SEQ, vocab=VOCAB):
    return torch.randint(3, vocab, (BATCH, seq))


def tokens(labels: str | None = None, mask: bool = True, seq: int = SEQ):
    """input_ids (+ attention_mask); for training, labels: "ids" (LM: the ids themselves)
    or "class" (one class per sequence)."""
    def make(task):
        ids = _ids(seq)
        kw = {"input_ids": ids}
        if mask:
            kw["attention_mask"] = torch.ones_like(ids)
        if task == "train" and labels == "ids":
            kw["labels"] = ids.clone()
        elif task == "train" and labels == "class":
            kw["labels"] = torch.randint(0, 2, (BATCH,))
        return kw
    return make


def seq2seq(task):
    ids, dec = _ids(), _ids()
    kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if task == "train":
        kw["labels"] = dec
    else:
        kw["decoder_input_ids"] = dec
    return kw


def pixels(key: str = "pixel_values", size: int = IMAGE):
    def make(task):
        kw = {key: torch.randn(BATCH, 3, size, size)}
        if task == "train" and key == "pixel_values":
            kw["labels"] = torch.randint(0, CLASSES, (BATCH,))
        return kw
    return make


def audio(labels: str):
    def make(task):
        kw = {"input_values": torch.randn(BATCH, AUDIO)}
        if task == "train" and labels == "ctc":
            kw["labels"] = torch.randint(1, 30, (BATCH, 4))
        elif task == "train":
            kw["labels"] = torch.randint(0, 2, (BATCH,))
        return kw
    return make


def whisper_inputs(task):
    kw = {"input_features": torch.randn(BATCH, MELS, 32)}
    dec = _ids(6, 128)
    kw["labels" if task == "train" else "decoder_input_ids"] = dec
    return kw


# --- losses -----------------------------------------------------------------------------

def model_loss(out, inputs):
    """The loss the model computed from the labels in `inputs`."""
    return out.loss


def class_loss(out, inputs):
    """Cross-entropy of a classifier's logits against fixed targets."""
    logits = out if isinstance(out, torch.Tensor) else out[0]
    targets = torch.arange(logits.shape[0]) % logits.shape[-1]
    return F.cross_entropy(logits, targets)


# --- the suite --------------------------------------------------------------------------

LM = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
          num_attention_heads=4, max_position_embeddings=64, use_cache=False)
GQA = dict(LM, num_key_value_heads=2)
ENC = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
           num_attention_heads=4, max_position_embeddings=64)
BART = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
            use_cache=False)
VIT = dict(image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=64, num_labels=CLASSES)
W2V = dict(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
           conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=16,
           num_conv_pos_embedding_groups=4, num_labels=2)
IMG = pixels("x")

MODELS: list[ModelSpec] = [
    # decoder LLMs: the loss is the model's own (labels = the ids)
    ModelSpec("llama", "decoder", "transformers", hf("LlamaForCausalLM", "LlamaConfig", **GQA),
              tokens("ids"), model_loss),
    ModelSpec("mistral", "decoder", "transformers", hf("MistralForCausalLM", "MistralConfig", **GQA),
              tokens("ids"), model_loss),
    ModelSpec("qwen2", "decoder", "transformers", hf("Qwen2ForCausalLM", "Qwen2Config", **GQA),
              tokens("ids"), model_loss),
    ModelSpec("qwen3", "decoder", "transformers", hf("Qwen3ForCausalLM", "Qwen3Config", **GQA, head_dim=8),
              tokens("ids"), model_loss),
    ModelSpec("gemma", "decoder", "transformers", hf("GemmaForCausalLM", "GemmaConfig", **GQA, head_dim=8),
              tokens("ids"), model_loss),
    ModelSpec("phi", "decoder", "transformers", hf("PhiForCausalLM", "PhiConfig", **LM),
              tokens("ids"), model_loss),
    ModelSpec("gpt2", "decoder", "transformers",
              hf("GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                 n_positions=64, use_cache=False, bos_token_id=1, eos_token_id=2),
              tokens("ids"), model_loss),
    ModelSpec("gpt_neox", "decoder", "transformers",
              hf("GPTNeoXForCausalLM", "GPTNeoXConfig", **LM), tokens("ids"), model_loss),
    ModelSpec("opt", "decoder", "transformers",
              hf("OPTForCausalLM", "OPTConfig", vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                 num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32, use_cache=False),
              tokens("ids"), model_loss),
    ModelSpec("bloom", "decoder", "transformers",
              hf("BloomForCausalLM", "BloomConfig", vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4,
                 use_cache=False),
              tokens("ids"), model_loss),
    ModelSpec("falcon", "decoder", "transformers",
              hf("FalconForCausalLM", "FalconConfig", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, use_cache=False),
              tokens("ids"), model_loss),
    ModelSpec("gptj", "decoder", "transformers",
              hf("GPTJForCausalLM", "GPTJConfig", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                 n_positions=64, use_cache=False),
              tokens("ids"), model_loss),
    # encoders: sequence classification, labels = one class per sequence
    ModelSpec("bert", "encoder", "transformers", hf("BertForSequenceClassification", "BertConfig", **ENC),
              tokens("class"), model_loss),
    ModelSpec("roberta", "encoder", "transformers",
              hf("RobertaForSequenceClassification", "RobertaConfig", **ENC), tokens("class"), model_loss),
    ModelSpec("distilbert", "encoder", "transformers",
              hf("DistilBertForSequenceClassification", "DistilBertConfig", vocab_size=VOCAB, dim=32, hidden_dim=64,
                 n_layers=2, n_heads=4, max_position_embeddings=64),
              tokens("class"), model_loss),
    ModelSpec("albert", "encoder", "transformers",
              hf("AlbertForSequenceClassification", "AlbertConfig", **ENC, embedding_size=16),
              tokens("class"), model_loss),
    ModelSpec("electra", "encoder", "transformers",
              hf("ElectraForSequenceClassification", "ElectraConfig", **ENC, embedding_size=16),
              tokens("class"), model_loss),
    ModelSpec("deberta_v2", "encoder", "transformers",
              hf("DebertaV2ForSequenceClassification", "DebertaV2Config", **ENC), tokens("class"), model_loss),
    ModelSpec("bert_mlm", "encoder", "transformers", hf("BertForMaskedLM", "BertConfig", **ENC),
              tokens("ids"), model_loss),
    # encoder-decoders: the loss is the model's own (labels = decoder targets)
    ModelSpec("t5", "encoder-decoder", "transformers",
              hf("T5ForConditionalGeneration", "T5Config", vocab_size=VOCAB, d_model=32, d_ff=64, d_kv=8,
                 num_layers=2, num_heads=4, use_cache=False, decoder_start_token_id=0),
              seq2seq, model_loss),
    ModelSpec("bart", "encoder-decoder", "transformers",
              hf("BartForConditionalGeneration", "BartConfig", **BART), seq2seq, model_loss),
    ModelSpec("marian", "encoder-decoder", "transformers",
              hf("MarianMTModel", "MarianConfig", **BART, decoder_start_token_id=0, pad_token_id=1),
              seq2seq, model_loss),
    ModelSpec("mbart", "encoder-decoder", "transformers",
              hf("MBartForConditionalGeneration", "MBartConfig", **BART), seq2seq, model_loss),
    # their default use_cache=True: the forward makes an EncoderDecoderCache, which deep-copies the config
    ModelSpec("bart_cache", "encoder-decoder", "transformers",
              hf("BartForConditionalGeneration", "BartConfig", **{**BART, "use_cache": True}), seq2seq, model_loss),
    ModelSpec("marian_cache", "encoder-decoder", "transformers",
              hf("MarianMTModel", "MarianConfig", **{**BART, "use_cache": True}, decoder_start_token_id=0,
                 pad_token_id=1),
              seq2seq, model_loss),
    ModelSpec("mbart_cache", "encoder-decoder", "transformers",
              hf("MBartForConditionalGeneration", "MBartConfig", **{**BART, "use_cache": True}), seq2seq, model_loss),
    # vision transformers and modern convnets
    ModelSpec("vit", "vision-transformer", "transformers",
              hf("ViTForImageClassification", "ViTConfig", **VIT), pixels(), model_loss),
    ModelSpec("deit", "vision-transformer", "transformers",
              hf("DeiTForImageClassification", "DeiTConfig", **VIT), pixels(), model_loss),
    ModelSpec("swin", "vision-transformer", "transformers",
              hf("SwinForImageClassification", "SwinConfig", image_size=IMAGE, patch_size=2, embed_dim=16,
                 depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=CLASSES),
              pixels(), model_loss),
    ModelSpec("convnext", "vision-transformer", "transformers",
              hf("ConvNextForImageClassification", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1],
                 num_stages=2, num_labels=CLASSES),
              pixels(), model_loss),
    ModelSpec("timm_vit", "vision-transformer", "timm",
              tm("vit_tiny_patch16_224", img_size=IMAGE, patch_size=8, embed_dim=32, depth=2, num_heads=4),
              IMG, class_loss),
    ModelSpec("timm_deit", "vision-transformer", "timm",
              tm("deit_tiny_distilled_patch16_224", img_size=IMAGE, patch_size=8, embed_dim=32, depth=2,
                 num_heads=4),
              IMG, class_loss),
    ModelSpec("timm_swin", "vision-transformer", "timm",
              tm("swin_tiny_patch4_window7_224", img_size=IMAGE, patch_size=2, embed_dim=16, depths=(1, 1),
                 num_heads=(2, 4), window_size=4),
              IMG, class_loss),
    ModelSpec("timm_convnext", "vision-transformer", "timm", tm("convnext_atto"), IMG, class_loss),
    # CNNs
    ModelSpec("tv_resnet18", "cnn", "torchvision", tv("resnet18"), IMG, class_loss),
    ModelSpec("tv_mobilenet_v3_small", "cnn", "torchvision", tv("mobilenet_v3_small"), IMG, class_loss),
    ModelSpec("tv_densenet121", "cnn", "torchvision", tv("densenet121"), IMG, class_loss),
    ModelSpec("tv_efficientnet_b0", "cnn", "torchvision", tv("efficientnet_b0"), IMG, class_loss),
    ModelSpec("tv_regnet_y_400mf", "cnn", "torchvision", tv("regnet_y_400mf"), IMG, class_loss),
    ModelSpec("tv_shufflenet_v2", "cnn", "torchvision", tv("shufflenet_v2_x0_5"), IMG, class_loss),
    ModelSpec("tv_squeezenet", "cnn", "torchvision", tv("squeezenet1_1"), pixels("x", 64), class_loss),
    ModelSpec("timm_resnet18", "cnn", "timm", tm("resnet18"), IMG, class_loss),
    ModelSpec("timm_efficientnet_b0", "cnn", "timm", tm("efficientnet_b0"), IMG, class_loss),
    ModelSpec("timm_mobilenetv3", "cnn", "timm", tm("mobilenetv3_small_050"), IMG, class_loss),
    ModelSpec("timm_regnetx_002", "cnn", "timm", tm("regnetx_002"), IMG, class_loss),
    ModelSpec("timm_ghostnet", "cnn", "timm", tm("ghostnet_050"), IMG, class_loss),
    # speech
    ModelSpec("wav2vec2", "speech", "transformers", hf("Wav2Vec2ForCTC", "Wav2Vec2Config", **W2V),
              audio("ctc"), model_loss),
    ModelSpec("hubert", "speech", "transformers",
              hf("HubertForSequenceClassification", "HubertConfig", **W2V), audio("class"), model_loss),
    ModelSpec("whisper", "speech", "transformers",
              hf("WhisperForConditionalGeneration", "WhisperConfig", vocab_size=128, num_mel_bins=MELS, d_model=32,
                 encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                 encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16, max_target_positions=32,
                 decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False),
              whisper_inputs, model_loss),
    ModelSpec("whisper_cache", "speech", "transformers",
              hf("WhisperForConditionalGeneration", "WhisperConfig", vocab_size=128, num_mel_bins=MELS, d_model=32,
                 encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                 encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16, max_target_positions=32,
                 decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=True),
              whisper_inputs, model_loss),
]

BY_NAME = {spec.name: spec for spec in MODELS}
