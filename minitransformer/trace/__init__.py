"""Step through one training step: every functional call, forward and backward, with its numbers.

    from minitransformer.trace import trace, traced_step, write_page
    with trace(model) as t:                     # any Module (a whole model or one layer), or a dict of arrays
        loss = ...                              # forward, loss, backward: whatever runs in the block
    for step in t.steps:                        # in call order
        print(step.index, step.phase, step.scope, step.op, [v.name for v in step.results])

    t = traced_step("gpt")                      # one training step of a tiny model (run.py)
    write_page(t, "trace.html")                 # the page to step through in a browser (page.py)

A Step holds the routine (its name, file and line, the equation of its docstring),
the call site, the scope (the model's dotted name: ``blocks.0.attn.sublayer``), and
every argument and result as a Value: name, shape, dtype, statistics and a bounded
preview; parameters carry their dotted names, an argument that an earlier step
returned links to it, and a backward links to the forward it reverses and each of its
gradients to the forward value it belongs to.

How the calls are seen, and why this way: ``sys.settrace``, for the thread that runs
the block (record.py). The Modules call the math through ``twin(layernorm_forward)``
and ``gpt_reference.py`` calls it by the names it imported: replacing names would
have to find every module that bound one (and ``twin``'s table, and the lectures'
own imports), and would change those modules for every thread while the block runs.
A trace function replaces nothing: it recognises a routine by its code object,
however it was reached, including through a speed-wing twin (recorded as its plain
form). It is per-thread, chains to a trace function already installed (a debugger,
coverage), and on exit the previous one is put back, so the process is left as it
was. The math files (``functional/``) are not changed and not wrapped.

Layering: this folder sits between models/ and the commands (cli/trace.py); the
homework export calls ``compare.write_reference`` to store a reference trace's
numbers in a student's copy (compare.py says how the copy's trace is compared).
"""
from .page import write_page
from .record import Step, Trace, trace
from .run import FAMILIES, trace_step, traced_step
from .values import Limits, Value

__all__ = ["trace", "Trace", "Step", "Value", "Limits", "traced_step", "trace_step", "FAMILIES", "write_page"]
