"""The grader's channel: frames of JSON and raw array bytes, read strictly on both sides.

Shared by the trusted parent (homework/sandbox.py) and the child (homework/child.py,
whose process runs this file's text before its own: ``python -I -S -c`` takes one
text, so this file imports nothing of the package and uses no ``__future__`` import).

A frame is an 8-byte length, a 4-byte JSON length, the JSON header (at most
MAX_HEADER bytes, parsed only once bounded) and the arrays' bytes. A value travels
as a tree: numbers, strings, ``{"array": i, "dtype", "shape"}`` (little-endian
bytes, a dtype from DTYPES: never object, string or record dtypes, never pickle),
``{"tuple": [...]}``, ``{"dict": {...}}``, for anything else a ``Handle``
(``encode``/``decode``: the object stays on the side that made it), and ``{"lent": name}``,
a function of the parent the child may call through it while one call runs (``Lent``).

The calls of a function the graded assignment needs (homework/needs.py) travel whole
instead (``Whole``): a cache NamedTuple by its class and fields, a Module answering
for its own method by its state, a NumPy generator by its state, sent back after the
call. ``Whole`` resolves a class only inside the package's ``functional`` and
``layers``, builds only NamedTuples and plain objects, and bounds every array.
"""
import json
import os
import re
import struct

MAX_FRAME = 64 << 20          # bytes in one message
MAX_HEADER = 1 << 20          # bytes of its JSON (the arrays travel as bytes beside it)
MAX_ITEMS = 4096              # values in one message
MAX_DEPTH = 16                # nesting of a value
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")   # never object, strings, records


class Handle:
    """An object that stays on the other side (a cache, a Module), named by a number."""

    def __init__(self, id, type_name=""):
        self.id, self.type_name = id, type_name

    def __repr__(self):
        return f"<{self.type_name or 'object'} #{self.id} in the student's process>"


class Lent:
    """A function of the grader's (a known function a case passes to the student's code), sent by
    the name the child asks the parent about (homework/needs.py ``Answers.lend``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<the grader's function {self.name}>"


LENT = "lent"                 # the type ``decode`` gives ``lookup`` for a lent function's name


# ------------------------------------------------------------------ frames
def frame_bytes(header: dict, blobs: list) -> bytes:
    head = json.dumps(dict(header, sizes=[len(b) for b in blobs])).encode()
    body = struct.pack("<I", len(head)) + head + b"".join(blobs)
    return struct.pack("<Q", len(body)) + body


def write_frame(fd, header: dict, blobs: list) -> None:
    """Blocking: the child's side (the parent writes with a deadline, sandbox.Sandbox._send)."""
    data = frame_bytes(header, blobs)
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd, n: int, wait=None) -> bytes:
    parts, left = [], n
    while left:
        if wait is not None:
            wait()
        try:
            chunk = os.read(fd, min(left, 1 << 20))
        except BlockingIOError:
            continue                          # readable by select, taken by no one: wait again
        if not chunk:
            raise EOFError("the other side closed the channel")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd, wait=None) -> tuple:
    """(header, blobs); ValueError on anything malformed or oversized. The JSON header is bounded
    before it is parsed (64 MB of "[{},{}..." is gigabytes of Python objects), and nesting too
    deep for the parser is a malformed message, not the reader's crash."""
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, wait))
    if n > MAX_FRAME or n < 4:
        raise ValueError(f"a message of {n} bytes (at most {MAX_FRAME})")
    body = _read_exact(fd, n, wait)
    (h,) = struct.unpack("<I", body[:4])
    if h > min(n - 4, MAX_HEADER):
        raise ValueError(f"a message header of {h} bytes in a message of {n} (at most {MAX_HEADER})")
    try:
        header = json.loads(body[4:4 + h].decode())
    except RecursionError as e:
        raise ValueError("a message nested too deeply") from e
    except UnicodeDecodeError as e:
        raise ValueError("a message header that is not UTF-8") from e
    sizes = header.get("sizes") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or len(sizes) > MAX_ITEMS or \
            not all(type(s) is int and s >= 0 for s in sizes) or 4 + h + sum(sizes) != n:
        raise ValueError("a message whose sizes do not add up")
    blobs, at = [], 4 + h
    for s in sizes:
        blobs.append(body[at:at + s])
        at += s
    return header, blobs


# ------------------------------------------------------------------ values by handle
def encode(value, blobs: list, keep):
    """A JSON-able tree; arrays go to ``blobs``; ``keep(obj)`` -> Handle for anything else."""
    import numpy as np
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Handle):
        return {"handle": value.id}
    if isinstance(value, Lent):
        return {"lent": value.name}
    if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.name in DTYPES:
        return _array_tree(value, blobs)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"dtype": np.dtype(value).name}
    if type(value) in (tuple, list):
        return {"tuple": [encode(v, blobs, keep) for v in value]}
    if type(value) is dict and all(type(k) is str for k in value):
        return {"dict": {k: encode(v, blobs, keep) for k, v in value.items()}}
    if isinstance(value, np.random.Generator):      # by its state (dropout's random path draws from it)
        return {"generator": type(value.bit_generator).__name__,
                "state": encode(value.bit_generator.state, blobs, keep)}
    handle = keep(value)
    return {"handle": handle.id, "type": handle.type_name}


def decode(tree, blobs: list, lookup, depth: int = 0):
    """The inverse of encode, strict: ValueError on any other shape; ``lookup(id, type)`` -> object (a
    lent function's name comes with the type LENT)."""
    import numpy as np
    if depth > MAX_DEPTH:
        raise ValueError("a value nested too deeply")
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is not dict or len(tree) not in (1, 2, 3, 4):
        raise ValueError(f"not a value: {str(tree)[:80]}")
    if "array" in tree:
        return _array(tree, blobs)
    if "handle" in tree and type(tree["handle"]) is int:
        return lookup(tree["handle"], str(tree.get("type", ""))[:80])
    if "lent" in tree and type(tree["lent"]) is str and len(tree) == 1:
        return lookup(tree["lent"][:80], LENT)
    if "dtype" in tree and tree["dtype"] in ("float64", "float32", "float16", "int64"):
        return np.dtype(tree["dtype"]).type
    if "tuple" in tree and type(tree["tuple"]) is list:
        return tuple(decode(v, blobs, lookup, depth + 1) for v in tree["tuple"])
    if "dict" in tree and type(tree["dict"]) is dict:
        return {str(k): decode(v, blobs, lookup, depth + 1) for k, v in tree["dict"].items()}
    if "generator" in tree and len(tree) == 2:
        return _plain_generator(tree["generator"], decode(tree.get("state"), blobs, lookup, depth + 1))
    raise ValueError(f"not a value: {str(tree)[:80]}")


def _plain_generator(name, state):
    """A NumPy Generator of a known kind, brought to ``state``; ValueError on anything else."""
    import numpy as np
    if name not in BIT_GENERATORS:
        raise ValueError(f"a generator of kind {str(name)[:20]}")
    bit_generator = getattr(np.random, name)()
    try:
        bit_generator.state = state
    except (TypeError, KeyError, ValueError, OverflowError) as e:
        raise ValueError(f"a {name} generator whose state is malformed ({str(e)[:80]})") from e
    return np.random.Generator(bit_generator)


def _array_tree(value, blobs: list) -> dict:
    import numpy as np
    array = np.asarray(value)
    blobs.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C"))
    tree = {"array": len(blobs) - 1, "dtype": array.dtype.name, "shape": list(array.shape)}
    if isinstance(value, np.generic):
        tree["scalar"] = True
    return tree


def _array(tree, blobs, largest=None):
    """Raw little-endian bytes, a dtype named in DTYPES and a shape whose size matches them;
    ``largest`` = (entries, entries on one axis) bounds it."""
    import numpy as np
    index, dtype, shape = tree.get("array"), tree.get("dtype"), tree.get("shape")
    if type(index) is not int or not 0 <= index < len(blobs):
        raise ValueError("an array index out of range")
    if dtype not in DTYPES or type(shape) is not list or len(shape) > 32 or \
            not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"an array of dtype {str(dtype)[:20]}, shape {str(shape)[:40]}")
    if largest is not None and any(n > largest[1] for n in shape):
        raise ValueError(f"an array of shape {tuple(shape)} (at most {largest[1]} along an axis)")
    kind = np.dtype(dtype).newbyteorder("<")
    size = 1
    for n in shape:
        size *= n
    if largest is not None and size > largest[0]:
        raise ValueError(f"an array of {size} entries (at most {largest[0]})")
    if size * kind.itemsize != len(blobs[index]):
        raise ValueError("an array whose bytes do not match its shape")
    array = np.frombuffer(blobs[index], dtype=kind).astype(np.dtype(dtype)).reshape(shape)
    return array[()] if tree.get("scalar") is True and array.ndim == 0 else array


# ------------------------------------------------------------------ values whole (the needed calls)
SPEC = re.compile(r"^(functional|layers)(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*$")
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


class Whole:
    """A value by value, both ways. ``package``: the package whose classes a tree names (the
    student's copy in the child, the reference in the grader); ``largest`` = (entries of one
    array, entries along one axis, entries of all arrays together) bounds what is decoded.
    ``generators`` collects the NumPy generators met, in order, encoding or decoding."""

    def __init__(self, package: str, largest=(1 << 24, 1 << 24, 1 << 26)):
        self.package, self.largest, self.generators, self.entries = package, largest, [], 0
        self.values = 0               # decoded so far: at most MAX_ITEMS (a dict of colliding int keys
        #                               costs quadratic time: 35,000 of them in a 1 MiB header, seconds)

    # ------------------------------------------------------------- value -> tree
    def encode(self, value, blobs: list, depth: int = 0):
        import numpy as np
        if depth > MAX_DEPTH:
            raise TypeError("a value nested too deeply")
        if value is None or type(value) in (bool, int, float, str):
            return value
        if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.name in DTYPES:
            return _array_tree(value, blobs)
        if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
            return {"dtype": np.dtype(value).name}
        if value is np:
            return {"module": "numpy"}                  # xp, the array module of the math (never CuPy here)
        if isinstance(value, np.random.Generator):
            self.generators.append(value)
            return {"generator": type(value.bit_generator).__name__,
                    "state": self.encode(value.bit_generator.state, blobs, depth + 1)}
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            return {"named": self._spec(type(value)), "fields": [self.encode(v, blobs, depth + 1) for v in value]}
        if type(value) in (tuple, list):
            return {type(value).__name__: [self.encode(v, blobs, depth + 1) for v in value]}
        if type(value) is dict:
            if all(type(k) is str for k in value):
                return {"dict": {k: self.encode(v, blobs, depth + 1) for k, v in value.items()}}
            return {"items": [[self.encode(k, blobs, depth + 1), self.encode(v, blobs, depth + 1)]
                              for k, v in value.items()]}
        if hasattr(value, "__dict__") and not isinstance(value, type):        # _spec refuses functions, modules
            return {"object": self._spec(type(value)), "state": self.encode(vars(value), blobs, depth + 1)}
        raise TypeError(f"a {type(value).__name__} cannot be sent to the grader")

    def _spec(self, cls) -> str:
        module = getattr(cls, "__module__", "")
        spec = f"{module[len(self.package) + 1:]}:{cls.__qualname__}"
        if not module.startswith(self.package + ".") or not SPEC.match(spec):
            raise TypeError(f"a {cls.__name__} (from {module}) cannot be sent to the grader")
        return spec

    # ------------------------------------------------------------- tree -> value
    def decode(self, tree, blobs: list, depth: int = 0):
        import numpy as np
        if depth > MAX_DEPTH:
            raise ValueError("a value nested too deeply")
        self.values += 1
        if self.values > MAX_ITEMS:
            raise ValueError(f"more than {MAX_ITEMS} values in one call")
        if tree is None or type(tree) in (bool, int, float, str):
            return tree
        if type(tree) is not dict or len(tree) > 4:
            raise ValueError(f"not a value: {str(tree)[:80]}")
        if "array" in tree:
            array = _array(tree, blobs, self.largest)
            self.entries += np.size(array)
            if self.entries > self.largest[2]:
                raise ValueError(f"more than {self.largest[2]} array entries in one call")
            return array
        if tree.get("dtype") in DTYPES and len(tree) == 1:
            return np.dtype(tree["dtype"]).type
        if tree == {"module": "numpy"}:
            return np
        if "generator" in tree:
            return self._generator(tree, blobs, depth)
        if type(tree.get("named")) is str and type(tree.get("fields")) is list:
            cls = self._class(tree["named"], named=True)
            fields = [self.decode(v, blobs, depth + 1) for v in tree["fields"]]
            if len(fields) != len(cls._fields):
                raise ValueError(f"{cls.__name__} has {len(cls._fields)} fields, got {len(fields)}")
            return cls(*fields)
        for kind in ("tuple", "list"):
            if type(tree.get(kind)) is list and len(tree) == 1:
                values = [self.decode(v, blobs, depth + 1) for v in tree[kind]]
                return tuple(values) if kind == "tuple" else values
        if type(tree.get("dict")) is dict and len(tree) == 1:
            return {str(k): self.decode(v, blobs, depth + 1) for k, v in tree["dict"].items()}
        if type(tree.get("items")) is list and len(tree) == 1:
            return dict(self._item(pair, blobs, depth) for pair in tree["items"])
        if type(tree.get("object")) is str and type(tree.get("state")) is dict:
            cls = self._class(tree["object"], named=False)
            state = self.decode(tree["state"], blobs, depth + 1)
            if type(state) is not dict:
                raise ValueError("an object whose state is not a dict")
            obj = object.__new__(cls)
            obj.__dict__.update(state)
            return obj
        raise ValueError(f"not a value: {str(tree)[:80]}")

    def _item(self, pair, blobs, depth) -> tuple:
        if type(pair) is not list or len(pair) != 2:
            raise ValueError("a dict item that is not a pair")
        key = self.decode(pair[0], blobs, depth + 1)
        if not (key is None or type(key) in (bool, int, float, str, tuple)):
            raise ValueError(f"a dict key of type {type(key).__name__}")
        hash(key)                                  # a tuple holding an array: TypeError, malformed
        return key, self.decode(pair[1], blobs, depth + 1)

    def _generator(self, tree, blobs, depth):
        name = tree.get("generator")
        if name not in BIT_GENERATORS:
            raise ValueError(f"a generator of kind {str(name)[:20]}")
        generator = _plain_generator(name, self.decode(tree.get("state"), blobs, depth + 1))
        self.generators.append(generator)
        return generator

    def _class(self, spec: str, named: bool):
        """A NamedTuple (``named``) or a plain class of the package's functional/ or layers/."""
        import importlib
        if not SPEC.match(spec):
            raise ValueError(f"no class {spec[:80]!r} may be sent")
        module_name, name = spec.split(":")
        try:
            cls = getattr(importlib.import_module(f"{self.package}.{module_name}"), name)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"no class {spec!r} here") from e
        if not isinstance(cls, type):
            raise ValueError(f"{spec!r} is not a class")
        if named != (issubclass(cls, tuple) and hasattr(cls, "_fields")) or \
                (not named and (cls.__new__ is not object.__new__ or "__slots__" in vars(cls))):
            raise ValueError(f"{spec!r} cannot be built from a message")
        return cls


def apply_state(obj, state: dict) -> None:
    """Bring ``obj`` to ``state`` in place: arrays of the same shape and dtype are overwritten
    (a Module's grads stay the arrays its parameters() yields), dicts and objects of the same
    class merged, anything else replaced."""
    for key, new in state.items():
        obj.__dict__[key] = _merged(obj.__dict__.get(key), new)


def _merged(old, new):
    import numpy as np
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray) and old.shape == new.shape \
            and old.dtype == new.dtype and old.flags.writeable:
        old[...] = new
        return old
    if type(old) is dict and type(new) is dict:
        for k, v in new.items():
            old[k] = _merged(old.get(k), v)
        return old
    if hasattr(old, "__dict__") and type(old) is type(new) and not isinstance(old, type):
        apply_state(old, vars(new))
        return old
    return new
