"""Knowledge distillation's soft-target loss (Hinton, Vinyals & Dean 2015; DistilBERT, Sanh et al. 2019).

A small student learns from a trained teacher's whole distribution, not only from the
one right token: both sets of logits are divided by a temperature τ (τ > 1 softens the
teacher, so the small probabilities it gives the wrong tokens, "dark knowledge", carry
weight), and the student matches the teacher's softened distribution:

    q_t = softmax(z_t / τ)                       the teacher's soft targets      (N, V)
    log q_s = log_softmax(z_s / τ)               the student's softened log-probs (N, V)
    L = τ² · (1/N) Σ_n KL(q_t,n ‖ q_s,n) = τ² · (1/N) Σ_n Σ_v q_t (log q_t − log q_s)

Why τ². The gradient of the KL with respect to the student's logits is (q_s − q_t)/τ,
and for τ large q_s − q_t ≈ (z_s − z_t)/(V τ) (logits of zero mean), so it shrinks
like 1/τ²; multiplying by τ² keeps the soft loss's gradient the same size at every
temperature, so it can be added to the ordinary cross-entropy on the hard labels
(DistilBERT: L = 5.0 L_soft + 2.0 L_mlm + 1.0 L_cos) without retuning the weights.

Backward, with the teacher held constant (it is not trained):

    dz_s = dL · τ² · (q_s − q_t) / (τ N) = dL · τ (q_s − q_t) / N

Shapes: z_s, z_t (..., V), one floating dtype; N = the number of rows (all axes but the
last). The teacher's gradient is not computed: a frozen teacher has none to receive.
Stored: q_s and q_t (the backward's only needs).
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_dtype_like, check_float, check_min_ndim, check_number, check_same_shape
from .cross_entropy import check_dloss
from .softmax import log_softmax_forward


class DistillationCache(NamedTuple):
    q_s: object          # (N, V) the student's softened distribution
    q_t: object          # (N, V) the teacher's
    tau: float           # τ
    shape: tuple         # (..., V), the shape of dz_s


def distillation_forward(student_logits, teacher_logits, tau: float = 2.0):
    """L = τ² · mean over rows of KL(softmax(z_t/τ) ‖ softmax(z_s/τ)).

    Inputs: student_logits z_s (..., V) floating; teacher_logits z_t, z_s's shape and dtype;
            tau τ > 0 (finite).
    Returns: L as a 0-d array of the logits' dtype, DistillationCache.
    """
    xp = get_xp(student_logits, teacher_logits)
    check_float("student_logits", student_logits)
    check_min_ndim("student_logits", student_logits, 1)
    check_same_shape("teacher_logits", teacher_logits, student_logits.shape, "student_logits' shape")
    check_dtype_like("teacher_logits", teacher_logits, student_logits, "student_logits")
    tau = check_number("tau", tau, low=0.0, low_open=True, finite=True)
    V = student_logits.shape[-1]
    z_s = student_logits.reshape(-1, V)                            # (N, V)
    z_t = teacher_logits.reshape(-1, V)                            # (N, V)
    log_q_s, _ = log_softmax_forward(z_s / tau)                    # (N, V)
    log_q_t, _ = log_softmax_forward(z_t / tau)                    # (N, V)
    q_t = xp.exp(log_q_t)                                          # (N, V)
    kl = (q_t * (log_q_t - log_q_s)).sum(axis=1)                   # (N,) KL(q_t ‖ q_s) per row
    N = z_s.shape[0]
    loss = (tau * tau * kl.sum() / max(N, 1)).reshape(())          # ()
    return loss, DistillationCache(xp.exp(log_q_s), q_t, tau, tuple(student_logits.shape))


def distillation_backward(dloss, cache: DistillationCache):
    """dz_s = dL · τ (q_s − q_t) / N. Inputs: dloss, a scalar. Returns: dz_s (..., V) of the logits' dtype."""
    q_s, q_t, tau, shape = cache
    dloss = check_dloss(dloss)
    N = q_s.shape[0]
    dz = (dloss * tau / max(N, 1)) * (q_s - q_t)                   # (N, V) reverses: L = τ² Σ KL / N, KL through z_s / τ
    return dz.reshape(shape)                                       # (..., V)
