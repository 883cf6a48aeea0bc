"""The calls the graded assignment makes to the ones it builds on, answered by the grader.

While attention is graded, the student's attention calls softmax and dropout; those
must be right, or a softmax bug would cost attention's points too. Their code must
not enter the student's process either (a hook on ``compile`` caught it there, and an
exception message carried it out). So the child turns each function of the needed
assignments into a question (child.Server.ask): the arguments travel whole
(homework/wire.py: arrays, numbers, the cache NamedTuples the student's code may
read, a Module's state when its method is the one needed), ``Answers`` computes the
function here and sends back the value (and the Module's state, and any generator's,
after the call). Only the functions of the assignments the graded one needs are
answered, never one of its own targets, and never outside a graded call; the
arguments are bounded before anything is computed.

``package`` is the implementation that answers: the reference in the grader; in a
student's own local check (a copy, which holds no reference) the copy itself, so
there the student's own softmax answers their attention's calls.

A function the graded case itself passes to the student's code (a gradient checker's ``f``:
graded.KnownFunction, the grader's own) is lent the same way for one call (``lend``): the
child gets a name it may ask about (wire.Lent), the parent computes the values, and the
name is refused again once the call returns (``revoke``).

The arguments are the student's, so what the reference does with them is bounded
like the student's own process: ``Isolated`` computes the answers in a forked copy
of the grader (trusted code, nothing of the student's runs there) with an address
space of ``--memory-mb`` and the assignment's deadline, killed past either
(homework/sandbox.py, with the processes it starts). Arrays
within the bounds below still broadcast against each other (a cache's gamma of
shape (128, 1, 1, 128) against a dy of (1, 128, 128, 1) is 2^28 entries), and an
integer argument can ask for any size (repeat_kv's r, causal_mask's T and S): in the
grader's own process a 4 KB question made it hold 6 GB. Where this machine cannot
fork (not Linux), the answers are computed in the grader's process, as before.
"""
from __future__ import annotations

import warnings

import numpy as np

from .graded import resolve
from .registry import get, needed
from .wire import MAX_FRAME, Lent, Whole, frame_bytes

# What one needed call may carry: entries of one array, along one axis, of all its arrays. The
# graded cases stay far below (no axis above 24); the bounds keep what the answer computes small
# too: attention's scores B·H·T·S stay under 2^14 · 128 entries (16 MB in float64).
LARGEST = (1 << 14, 128, 1 << 18)


class Answers:
    """The grader's answers to the needed calls while ``assignment_id`` is graded."""

    def __init__(self, assignment_id: str, package: str):
        self.assignment, self.package = get(assignment_id), package
        self.allowed = {str(t) for a in needed(self.assignment) for t in a.targets}
        self.asked, self.lent = 0, {}

    def lend(self, name: str, fn) -> Lent:
        """``fn`` answerable as ``name`` (an argument's name) until ``revoke``: what the child gets."""
        spec = f"lent:{name}:{len(self.lent) + 1}"
        self.lent[spec] = fn
        return Lent(spec)

    def revoke(self) -> None:
        self.lent.clear()

    def reply(self, header: dict, blobs: list) -> tuple:
        """(reply header, blobs) to a ``need`` message; refusals and failures are error replies."""
        self.asked += 1
        spec = header.get("need")
        try:
            if spec not in self.allowed and spec not in self.lent:
                raise PermissionError(self._refusal(spec))
            whole = Whole(self.package, LARGEST)
            params = whole.decode(header.get("params"), blobs)
            value, owner = self._call(spec, params)
            out, sent = Whole(self.package), []
            tree = out.encode({"value": value, "generators": [g.bit_generator.state for g in whole.generators],
                               "owner": vars(owner) if owner is not None else None}, sent)
            return {"id": header.get("id"), "value": tree}, sent
        except Exception as e:                    # noqa: BLE001 - the call's arguments are the student's
            message = str(e).splitlines()[0][:300] if str(e) else ""
            return {"id": header.get("id"), "error": {"type": type(e).__name__[:40], "message": message}}, []

    def frame(self, header: dict, blobs: list) -> bytes:
        """The reply to a ``need`` message as the bytes sent to the child; an answer larger than the
        child reads (wire.MAX_FRAME) is an error reply instead."""
        data = frame_bytes(*self.reply(header, blobs))
        if len(data) > MAX_FRAME:
            data = frame_bytes({"id": header.get("id"), "error": {
                "type": "ValueError", "message": f"the answer is {len(data):,} bytes, more than a message may "
                                                 f"carry ({MAX_FRAME:,})"}}, [])
        return data

    def _call(self, spec: str, params) -> tuple:
        if type(params) is not dict or set(params) != {"args", "kwargs", "owner"} or \
                type(params["args"]) is not list or type(params["kwargs"]) is not dict:
            raise ValueError("a needed call must carry args, kwargs and owner")
        args, kwargs, owner = params["args"], params["kwargs"], params["owner"]
        if spec in self.lent:
            if owner is not None:
                raise TypeError(f"{spec.split(':')[1]} is a function, not a method")
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                return self.lent[spec](*args, **kwargs), None
        fn = resolve(self.package, spec)
        if "." in spec.split(":")[1]:
            cls = resolve(self.package, spec.rsplit(".", 1)[0])
            if type(owner) is not cls:
                raise TypeError(f"{spec.split(':')[1]} needs a {cls.__name__} to answer for")
            args = [owner] + args
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs), owner

    def _refusal(self, spec) -> str:
        if str(spec).startswith("lent:"):
            return f"{str(spec).split(':')[1][:40]} was lent for one call of your code, which has returned"
        name = str(spec).split(":")[-1][:80]
        own = {str(t) for t in self.assignment.targets}
        if spec in own:
            return f"{name} is graded in {self.assignment.id}: the grader answers it only as your own code"
        allowed = ", ".join(sorted(s.split(":")[1] for s in self.allowed)) or "nothing"
        return (f"{name}: while {self.assignment.id} is graded the grader answers only the functions it "
                f"builds on ({allowed})")

