"""GridPositionEmbedding Module: owns E_row (Hp, C), E_col (Wp, C), e_cls (C,);
the math is functional.grid_positions."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.grid_positions import grid_positions_backward, grid_positions_forward
from ..validate import check_int, check_number, check_size
from .module import Module


class GridPositionEmbedding(Module):
    """forward() -> P (1 + Hp·Wp, C): e_cls, then E_row[r] + E_col[s] row by row.

    The model adds P to a (B, 1 + N, C) batch, broadcasting over B, so backward
    takes dP (1 + N, C) already summed over the batch. Every table ~ N(0, init_std²).
    """

    def __init__(self, grid_height: int, grid_width: int, d_model: int, *, rng=None,
                 init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        Hp = check_int("grid_height", grid_height, low=1)
        Wp = check_int("grid_width", grid_width, low=1)
        C = check_int("d_model", d_model, low=1)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        check_size("grid_height, d_model", (Hp, C))
        check_size("grid_width, d_model", (Wp, C))
        rng = default_rng(rng)
        self.add_param("E_row", init.normal(rng, (Hp, C), init_std, dtype))
        self.add_param("E_col", init.normal(rng, (Wp, C), init_std, dtype))
        self.add_param("e_cls", init.normal(rng, (C,), init_std, dtype))

    def forward(self):
        P, cache = grid_positions_forward(self.E_row, self.E_col, self.e_cls)
        self._save(cache, P)
        return P                                                  # (1 + N, C)

    def backward(self, dP):
        """dP (1 + N, C) -> None (positions are no input); accumulates the three tables' grads."""
        dE_row, dE_col, de_cls = grid_positions_backward(dP, self._pop_cache(dP))
        self._accumulate("E_row", dE_row)
        self._accumulate("E_col", dE_col)
        self._accumulate("e_cls", de_cls)
        return None
