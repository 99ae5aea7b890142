"""A byte-level BPE tokenizer trained locally, carrying TRL's Qwen3 chat template verbatim."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from importlib import resources

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AddedToken, PreTrainedTokenizerFast

from .conversations import WORDS, echo, training_conversation
from .rendering import chat_text

TEMPLATE_RESOURCE = ("trl", "chat_templates/qwen3_instruct_2507.jinja")

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Qwen3's control tokens: the first three are special (dropped by skip_special_tokens);
# the tool and think markers are added but not special, as in Qwen3, so a decoded
# completion still shows them.
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
ADDED_TOKENS: tuple[str, ...] = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)

# GPT-2's split without its English contractions: with them, "'sun" in the user's
# "Echo 'sun'." would split as "'s" + "un" while the tool call's '"sun' keeps "sun",
# and the model would have to learn two spellings of one word.
PRETOKENIZE_PATTERN = r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def chat_template_text() -> str:
    """TRL's Qwen3-Instruct-2507 template, byte for byte: TRL only parses tool calls for
    templates it recognises by exact text."""
    package, name = TEMPLATE_RESOURCE
    return resources.files(package).joinpath(name).read_bytes().decode("utf-8")


def chat_template_sha256() -> str:
    return hashlib.sha256(chat_template_text().encode("utf-8")).hexdigest()


def _training_corpus(rng: random.Random, conversations: int) -> Iterator[str]:
    base = _wrap(_bare_tokenizer())
    for _ in range(conversations):
        yield chat_text(base, training_conversation(rng, exact_fraction=1.0), tools=[echo])
    # Every word with and without a leading space, often enough to become one token each.
    for _ in range(8):
        words = list(WORDS)
        rng.shuffle(words)
        yield " ".join(words)
        yield "\n".join(words)


def _bare_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    )
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tokenizer


def _wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        chat_template=chat_template_text(),
        model_max_length=4096,
        clean_up_tokenization_spaces=False,
    )


def train_tokenizer(
    *, vocab_size: int, seed: int, conversations: int = 400, extra_texts: Sequence[str] = ()
) -> PreTrainedTokenizerFast:
    """Train byte-level BPE on rendered echo conversations (so the constant tool prompt
    compresses well), the word list and `extra_texts` (another model's conversations)."""
    rng = random.Random(seed)
    corpus = list(_training_corpus(rng, conversations)) + list(extra_texts)
    tokenizer = _bare_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return _wrap(tokenizer)
