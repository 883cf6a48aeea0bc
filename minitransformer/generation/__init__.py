"""Generation: greedy, sampling (temperature, top-k, top-p) and beam search, for
GPT and the encoder-decoder, through the KV cache (or a rolling cache with attention
sinks: sink_cache.py); streaming.py scores a long text token by token through one."""
from .generate import STRATEGIES, generate
from .sink_cache import SinkDecoderCache, SinkKVCache, rolling_cache
