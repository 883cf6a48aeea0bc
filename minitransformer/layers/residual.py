"""A sublayer with its residual connection, normalisation and dropout.

    pre-norm  (GPT-2, most modern models):  y = x + Dropout(F(Norm(x)))
    post-norm (the original paper, BERT):   y = Norm(x + Dropout(F(x)))

Vaswani et al. (2017) place the norm after the residual sum ("post"); Xiong et
al. (2020) show the "pre" placement keeps gradients well scaled at
initialisation, so deep stacks train without a long warmup. Both are a config
value here, not a subclass.

Backward: the residual branch and the identity branch both receive the
gradient, and their contributions add (``dx = dy + dF``).

F may take extra inputs (cross-attention takes the encoder memory) and return
extra gradients for them; those pass through unchanged:
``backward(dy) -> dx`` or ``(dx, d_extra...)``.
"""
from __future__ import annotations

from ..validate import check_choice
from .module import Module


class Residual(Module):
    def __init__(self, sublayer: Module, norm: Module, dropout: Module, norm_position: str = "pre"):
        super().__init__()
        check_choice("norm_position", norm_position, ("pre", "post"))
        self.norm_position = norm_position
        self.add_child("norm", norm)
        self.add_child("sublayer", sublayer)
        self.add_child("dropout", dropout)

    def forward(self, x, *args, **kwargs):
        if self.norm_position == "pre":
            h = self.norm.forward(x)                                  # (B, T, C)
            f = self.sublayer.forward(h, *args, **kwargs)             # (B, T, C)
            s = self.dropout.forward(f)                               # (B, T, C) a fresh array
            s += x                                                    # y = x + Dropout(F(Norm(x)))
            return s
        f = self.sublayer.forward(x, *args, **kwargs)                 # (B, T, C)
        s = self.dropout.forward(f)
        s += x                                                        # s = x + Dropout(F(x))
        return self.norm.forward(s)                                   # (B, T, C)

    def backward(self, dy):
        """dy (B, T, C) -> dx (B, T, C), and the sublayer's extra gradients (dmemory) after it.

        Pre-norm,  y = x + dropout(f(norm(x))):   dx = dy (the identity) + norm_backward(f_backward(dropout_backward(dy)))
        Post-norm, y = norm(x + dropout(f(x))):   ds = norm_backward(dy); dx = ds + f_backward(dropout_backward(ds))
        The identity branch passes the gradient through unchanged and ADDS to the sublayer's.
        """
        if self.norm_position == "pre":
            dh, extra = _split(self.sublayer.backward(self.dropout.backward(dy)))
            dx = self.norm.backward(dh)
            dx += dy                                                  # identity branch adds
        else:
            ds = self.norm.backward(dy)
            dx, extra = _split(self.sublayer.backward(self.dropout.backward(ds)))
            dx = dx + ds                                              # identity branch adds
        return (dx, *extra) if extra else dx


def _split(grads):
    """(d_input, extra gradients) from a sublayer's backward result."""
    if isinstance(grads, tuple):
        return grads[0], grads[1:]
    return grads, ()
