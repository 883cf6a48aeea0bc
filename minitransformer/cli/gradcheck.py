"""`python -m minitransformer gradcheck`: every backward against central differences.

Runs the public checker (minitransformer/gradcheck) in float64 on each layer with small random
inputs and a random upstream gradient, prints one table per layer, and exits 1 if
any tensor is NOT OK. The same calls are how a student checks their own layer.
"""
from __future__ import annotations

from ..gradcheck.suite import layer_checks


def run_gradcheck(args) -> int:
    failed = []
    for name, thunk in layer_checks(args.seed):
        result = thunk()
        print(f"\n== {name}: max relative error {result.max_rel_error:.2e}")
        print(result)
        if not result.ok:
            failed.append(name)
    print(f"\n{'all layers OK' if not failed else 'NOT OK: ' + ', '.join(failed)}")
    return 1 if failed else 0


def add_gradcheck_arguments(p) -> None:
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
