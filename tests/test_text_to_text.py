"""T5's text-to-text tasks: a prefix id names the task, the targets are the task's own, a batch
mixes the tasks, and one Seq2Seq trains on them with the ordinary loop."""
import numpy as np
import pytest

from minitransformer.models import Seq2Seq, Seq2SeqConfig
from minitransformer.training import TrainConfig, train
from minitransformer.training.data import make_sequence_task
from minitransformer.training.tasks import TextToTextTasks


def test_a_prefix_names_the_task_and_the_targets_are_the_tasks_own():
    data = TextToTextTasks(("reverse", "sort"), vocab=10, length_range=(2, 5), batch_size=64, n_val=20)
    assert data.vocab_size == 12 and data.prefix_id("reverse") == 10 and data.prefix_id("sort") == 11
    for task in ("reverse", "sort"):
        val = data.val[task]
        assert (val.src[:, 0] == data.prefix_id(task)).all()
        plain = make_sequence_task(task, 20, (2, 5), 10, np.random.default_rng([0, 99, data.tasks.index(task)]))
        np.testing.assert_array_equal(val.src[:, 1:], plain.src)
        np.testing.assert_array_equal(val.src_lengths, plain.src_lengths + 1)
        np.testing.assert_array_equal(val.tgt_out, plain.tgt_out)
    src, lengths, tgt_in, tgt_out = data.batch("train", np.random.default_rng(0))
    prefixes = src[:, 0]
    assert set(prefixes) == {10, 11}                                      # a batch mixes the tasks
    for row in range(64):
        L = lengths[row] - 1
        symbols = src[row, 1:1 + L]
        expected = symbols[::-1] if prefixes[row] == 10 else np.sort(symbols)
        np.testing.assert_array_equal(tgt_out[row, :L], expected)
    with pytest.raises(ValueError, match=r"tasks\[1\]: expected one of"):
        TextToTextTasks(("reverse", "translate"), 10, (2, 5), 4)
    with pytest.raises(ValueError, match="tasks: expected distinct task names"):
        TextToTextTasks(("sort", "sort"), 10, (2, 5), 4)


def test_one_seq2seq_trains_on_two_prefixed_tasks():
    data = TextToTextTasks(("reverse", "sort"), vocab=8, length_range=(2, 4), batch_size=32, n_val=20)
    model = Seq2Seq(Seq2SeqConfig(vocab_size=data.vocab_size, block_size=6, n_layer=1, n_head=2, d_model=16), rng=0)
    result = train(model, data, TrainConfig(steps=40, lr=3e-3, warmup_steps=4, eval_interval=40, log_interval=40,
                                            final_eval_batches=2), log=lambda *_: None)
    losses = [loss for _, loss in result.history]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3
